/*
 * Address vector: fi_addr_t is an index into a table of peers for both
 * FI_AV_MAP and FI_AV_TABLE. Inserting only records a name: it never
 * contacts the peer, so the address of a peer that has exited inserts like
 * any other. The first operation that needs the peer's worker address
 * fetches it (axon_fi_av_resolve, from an endpoint's connection or a
 * directed receive); a peer that cannot be reached then fails that
 * operation, not the insert. Names carrying a worker id share one peer
 * (duplicates) and map senders to fi_addrs (FI_SOURCE) from the start.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "axon_fi.h"

/* ---------------------------------------------------------------- peers */

fi_addr_t axon_fi_av_sender_addr(axon_fi_av_t *av, uint64_t sender)
{
    uint64_t addr;

    return axon_fi_map_get(&av->by_sender, sender, &addr) ? (fi_addr_t)addr : FI_ADDR_NOTAVAIL;
}

/* A worker id learnt (from the name or the peer's server): duplicates and FI_SOURCE see it. */
static int axon_fi_av_learn_id(axon_fi_av_t *av, axon_fi_peer_t *peer, uint64_t id)
{
    uint64_t found;
    int ret = 0;

    peer->id = id;
    if (!axon_fi_map_get(&av->by_id, id, &found)) {
        ret = axon_fi_map_put(&av->by_id, id, (uintptr_t)peer);
    }
    if ((ret == 0) && !axon_fi_map_get(&av->by_sender, id, &found)) {
        ret = axon_fi_map_put(&av->by_sender, id, peer->first);
    }
    return ret;
}

axon_status_t axon_fi_av_resolve(axon_fi_av_t *av, axon_fi_peer_t *peer)
{
    char str[96];
    void *addr;
    size_t len;
    uint64_t id;

    if (peer->addr != NULL) {
        return AXON_OK;
    }
    if (peer->status != AXON_OK) {
        return peer->status;   /* asked before: a peer that refused does not come back */
    }
    if (axon_fi_addr_fetch(&peer->name, &addr, &len, &id) != 0) {
        peer->status = AXON_ERR_UNREACHABLE;   /* logged by the fetch */
        return peer->status;
    }
    if ((peer->id != 0) && (id != peer->id)) {
        axon_fi_name_str(&peer->name, str, sizeof(str));
        AXON_FI_WARN(FI_LOG_AV, "%s is served by worker %016llx now: the name is stale", str,
                     (unsigned long long)id);
        free(addr);
        peer->status = AXON_ERR_UNREACHABLE;
        return peer->status;
    }
    if ((peer->id == 0) && (axon_fi_av_learn_id(av, peer, id) != 0)) {
        free(addr);
        return AXON_ERR_NO_MEMORY;
    }
    peer->addr     = addr;
    peer->addr_len = len;
    return AXON_OK;
}

static int axon_fi_peer_create(axon_fi_av_t *av, const axon_fi_name_t *name, fi_addr_t index,
                               axon_fi_peer_t **peer_p)
{
    axon_fi_peer_t *peer;
    uint64_t id = axon_fi_name_id(name);

    peer = calloc(1, sizeof(*peer));
    if (peer == NULL) {
        return -FI_ENOMEM;
    }
    peer->name  = *name;
    peer->first = index;
    if ((id != 0) && (axon_fi_av_learn_id(av, peer, id) != 0)) {
        axon_fi_map_del(&av->by_id, id);
        free(peer);
        return -FI_ENOMEM;
    }
    *peer_p = peer;
    return 0;
}

/* Drop one reference; the last one forgets the peer. */
static void axon_fi_peer_release(axon_fi_av_t *av, axon_fi_peer_t *peer)
{
    uint64_t val;

    if (--peer->refs > 0) {
        return;
    }
    if (peer->id != 0) {
        if (axon_fi_map_get(&av->by_id, peer->id, &val) && (val == (uintptr_t)peer)) {
            axon_fi_map_del(&av->by_id, peer->id);
        }
        if (axon_fi_map_get(&av->by_sender, peer->id, &val) && (val == peer->first)) {
            axon_fi_map_del(&av->by_sender, peer->id);
        }
    }
    free(peer->addr);
    free(peer);
}

static int axon_fi_av_grow(axon_fi_av_t *av, size_t need)
{
    size_t cap = av->cap ? av->cap : 64;
    axon_fi_peer_t **table;

    while (cap < need) {
        cap *= 2;
    }
    if (cap == av->cap) {
        return 0;
    }
    table = realloc(av->table, cap * sizeof(*table));
    if (table == NULL) {
        return -FI_ENOMEM;
    }
    av->table = table;
    av->cap   = cap;
    return 0;
}

/* Record one name at the next index (lock held); *index is FI_ADDR_NOTAVAIL on failure. */
static int axon_fi_av_insert_name(axon_fi_av_t *av, const void *addr, fi_addr_t *index)
{
    axon_fi_peer_t *peer;
    axon_fi_name_t name;
    uint64_t found;
    int ret;

    *index = FI_ADDR_NOTAVAIL;
    ret = axon_fi_name_check(addr, &name);
    if (ret != 0) {
        return ret;
    }
    ret = axon_fi_av_grow(av, av->count + 1);
    if (ret != 0) {
        return ret;
    }
    if ((axon_fi_name_id(&name) != 0) &&
        axon_fi_map_get(&av->by_id, axon_fi_name_id(&name), &found)) {
        peer = (axon_fi_peer_t *)(uintptr_t)found;
    } else if ((ret = axon_fi_peer_create(av, &name, av->count, &peer)) != 0) {
        return ret;
    }
    ++peer->refs;
    *index = av->count;
    av->table[av->count++] = peer;
    return 0;
}

/* ---------------------------------------------------------------- AV ops */

/* The outcome of an insert: counted, or an EQ event with FI_EVENT. */
static int axon_fi_av_report(axon_fi_av_t *av, size_t done, void *context)
{
    struct fi_eq_entry entry = {.fid = &av->av_fid.fid, .context = context,
                                .data = (uint64_t)done};

    if (av->eq == NULL) {
        return (int)done;
    }
    axon_fi_eq_post(av->eq, FI_AV_COMPLETE, &entry, sizeof(entry), 0);
    return 0;
}

static int axon_fi_av_insert(struct fid_av *av_fid, const void *addr, size_t count,
                             fi_addr_t *fi_addr, uint64_t flags, void *context)
{
    axon_fi_av_t *av = container_of(av_fid, axon_fi_av_t, av_fid);
    const uint8_t *names = addr;
    int *errs = (flags & FI_SYNC_ERR) ? context : NULL;
    fi_addr_t index;
    size_t i, done = 0;
    int ret;

    if (flags & ~(uint64_t)(FI_MORE | FI_SYNC_ERR)) {
        AXON_FI_WARN(FI_LOG_AV, "fi_av_insert flags 0x%llx not supported",
                     (unsigned long long)flags);
        return -FI_EINVAL;
    }
    if ((addr == NULL) && (count > 0)) {
        AXON_FI_WARN(FI_LOG_AV, "fi_av_insert of %zu names from NULL", count);
        return -FI_EINVAL;
    }
    axon_fi_lock(av->domain);
    for (i = 0; i < count; ++i) {
        ret = axon_fi_av_insert_name(av, names + i * sizeof(axon_fi_name_t), &index);
        if (ret == 0) {
            ++done;
        } else if (av->eq != NULL) {
            struct fi_eq_err_entry err = {.fid = &av->av_fid.fid, .context = context,
                                          .data = i, .err = -ret};
            axon_fi_eq_post(av->eq, FI_AV_COMPLETE, &err, sizeof(err), 1);
        }
        if (fi_addr != NULL) {
            fi_addr[i] = index;
        }
        if (errs != NULL) {
            errs[i] = -ret;
        }
    }
    axon_fi_unlock(av->domain);
    return axon_fi_av_report(av, done, (errs != NULL) ? NULL : context);
}

/* node/service: the endpoint served there, found when first used (as fi_getinfo's dest_addr). */
static int axon_fi_av_insertsvc(struct fid_av *av_fid, const char *node, const char *service,
                                fi_addr_t *fi_addr, uint64_t flags, void *context)
{
    axon_fi_name_t name;
    int ret;

    if ((node == NULL) || (service == NULL)) {
        AXON_FI_WARN(FI_LOG_AV, "fi_av_insertsvc needs a node and a service (%s, %s)",
                     node ? node : "NULL", service ? service : "NULL");
        return -FI_EINVAL;
    }
    ret = axon_fi_name_resolve(node, service, &name);
    if (ret != 0) {
        AXON_FI_WARN(FI_LOG_AV, "fi_av_insertsvc: cannot resolve %s:%s", node, service);
        return -FI_EINVAL;
    }
    return axon_fi_av_insert(av_fid, &name, 1, fi_addr, flags, context);
}

static int axon_fi_av_insertsym(struct fid_av *av, const char *node, size_t nodecnt,
                                const char *service, size_t svccnt, fi_addr_t *fi_addr,
                                uint64_t flags, void *context)
{
    AXON_FI_WARN(FI_LOG_AV, "fi_av_insertsym is not supported (use fi_av_insertsvc per name)");
    return -FI_ENOSYS;
}

static int axon_fi_av_remove(struct fid_av *av_fid, fi_addr_t *fi_addr, size_t count,
                             uint64_t flags)
{
    axon_fi_av_t *av = container_of(av_fid, axon_fi_av_t, av_fid);
    axon_fi_peer_t *peer;
    int ret = 0;
    size_t i, j;

    axon_fi_lock(av->domain);
    for (i = 0; i < count; ++i) {
        peer = axon_fi_av_peer(av, fi_addr[i]);
        if (peer == NULL) {
            AXON_FI_WARN(FI_LOG_AV, "fi_av_remove: fi_addr %llu is not in the AV",
                         (unsigned long long)fi_addr[i]);
            ret = -FI_EINVAL;
            continue;
        }
        for (j = 0; j < av->eps.count; ++j) {
            axon_fi_conn_drop(av->eps.eps[j], fi_addr[i]);
        }
        av->table[fi_addr[i]] = NULL;
        axon_fi_peer_release(av, peer);
    }
    axon_fi_unlock(av->domain);
    return ret;
}

static int axon_fi_av_lookup(struct fid_av *av_fid, fi_addr_t fi_addr, void *addr,
                             size_t *addrlen)
{
    axon_fi_av_t *av = container_of(av_fid, axon_fi_av_t, av_fid);
    axon_fi_peer_t *peer;
    size_t len;

    axon_fi_lock(av->domain);
    peer = axon_fi_av_peer(av, fi_addr);
    if (peer == NULL) {
        axon_fi_unlock(av->domain);
        AXON_FI_WARN(FI_LOG_AV, "fi_av_lookup: fi_addr %llu is not in the AV",
                     (unsigned long long)fi_addr);
        return -FI_EINVAL;
    }
    len = (*addrlen < sizeof(peer->name)) ? *addrlen : sizeof(peer->name);
    memcpy(addr, &peer->name, len);
    axon_fi_unlock(av->domain);
    *addrlen = sizeof(peer->name);
    return 0;
}

static const char *axon_fi_av_straddr(struct fid_av *av, const void *addr, char *buf,
                                      size_t *len)
{
    axon_fi_name_t name;
    char str[128];
    size_t need;

    memcpy(&name, addr, sizeof(name));
    if (name.sin_family != AF_INET) {
        snprintf(str, sizeof(str), "fi_axon://invalid");
    } else {
        axon_fi_name_str(&name, str, sizeof(str));
    }
    need = strlen(str) + 1;
    if (*len > 0) {
        snprintf(buf, *len, "%s", str);
    }
    *len = need;
    return buf;
}

static int axon_fi_av_no_set(struct fid_av *av, struct fi_av_set_attr *attr,
                             struct fid_av_set **av_set, void *context)
{
    return -FI_ENOSYS;
}

static struct fi_ops_av axon_fi_av_ops = {
    .size      = sizeof(struct fi_ops_av),
    .insert    = axon_fi_av_insert,
    .insertsvc = axon_fi_av_insertsvc,
    .insertsym = axon_fi_av_insertsym,
    .remove    = axon_fi_av_remove,
    .lookup    = axon_fi_av_lookup,
    .straddr   = axon_fi_av_straddr,
    .av_set    = axon_fi_av_no_set,
};

static int axon_fi_av_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
    axon_fi_av_t *av = container_of(fid, axon_fi_av_t, av_fid.fid);

    if (bfid->fclass != FI_CLASS_EQ) {
        AXON_FI_WARN(FI_LOG_AV, "an AV binds only an EQ, not class %zu", bfid->fclass);
        return -FI_EINVAL;
    }
    if (!(av->flags & FI_EVENT)) {
        AXON_FI_WARN(FI_LOG_AV, "binding an EQ needs an AV opened with FI_EVENT");
        return -FI_EINVAL;
    }
    av->eq = container_of(bfid, axon_fi_eq_t, eq_fid.fid);
    pthread_mutex_lock(&av->eq->lock);
    ++av->eq->refs;
    pthread_mutex_unlock(&av->eq->lock);
    return 0;
}

static int axon_fi_av_close(struct fid *fid)
{
    axon_fi_av_t *av = container_of(fid, axon_fi_av_t, av_fid.fid);
    axon_fi_domain_t *domain = av->domain;
    size_t i;

    if (av->eps.count > 0) {
        AXON_FI_WARN(FI_LOG_AV, "AV still bound to %zu endpoints", av->eps.count);
        return -FI_EBUSY;
    }
    axon_fi_lock(domain);
    for (i = 0; i < av->count; ++i) {
        if (av->table[i] != NULL) {
            axon_fi_peer_release(av, av->table[i]);
        }
    }
    --domain->refs;
    axon_fi_unlock(domain);

    if (av->eq != NULL) {
        pthread_mutex_lock(&av->eq->lock);
        --av->eq->refs;
        pthread_mutex_unlock(&av->eq->lock);
    }
    axon_fi_eps_free(&av->eps);
    axon_fi_map_free(&av->by_id);
    axon_fi_map_free(&av->by_sender);
    free(av->table);
    free(av);
    return 0;
}

static struct fi_ops axon_fi_av_fi_ops = {
    .size     = sizeof(struct fi_ops),
    .close    = axon_fi_av_close,
    .bind     = axon_fi_av_bind,
    .control  = axon_fi_no_control,
    .ops_open = axon_fi_no_ops_open,
};

int axon_fi_av_open(struct fid_domain *domain_fid, struct fi_av_attr *attr, struct fid_av **av_p,
                    void *context)
{
    axon_fi_domain_t *domain = container_of(domain_fid, axon_fi_domain_t, domain_fid);
    axon_fi_av_t *av;

    if (attr == NULL) {
        AXON_FI_WARN(FI_LOG_AV, "fi_av_open without attributes");
        return -FI_EINVAL;
    }
    if ((attr->type != FI_AV_UNSPEC) && (attr->type != FI_AV_MAP) &&
        (attr->type != FI_AV_TABLE)) {
        AXON_FI_WARN(FI_LOG_AV, "AV type %d not supported", (int)attr->type);
        return -FI_EINVAL;
    }
    if (attr->flags & ~(uint64_t)(FI_EVENT | FI_SYMMETRIC)) {
        AXON_FI_WARN(FI_LOG_AV, "AV flags 0x%llx not supported", (unsigned long long)attr->flags);
        return -FI_ENOSYS;
    }
    if ((attr->name != NULL) || (attr->rx_ctx_bits != 0)) {
        AXON_FI_WARN(FI_LOG_AV, "named/shared AVs and rx_ctx_bits are not supported");
        return -FI_ENOSYS;
    }
    av = calloc(1, sizeof(*av));
    if (av == NULL) {
        return -FI_ENOMEM;
    }
    av->domain = domain;
    av->type   = (attr->type == FI_AV_UNSPEC) ? FI_AV_TABLE : attr->type;
    av->flags  = attr->flags;
    if (axon_fi_av_grow(av, attr->count) != 0) {
        free(av);
        return -FI_ENOMEM;
    }
    av->av_fid.fid.fclass  = FI_CLASS_AV;
    av->av_fid.fid.context = context;
    av->av_fid.fid.ops     = &axon_fi_av_fi_ops;
    av->av_fid.ops         = &axon_fi_av_ops;
    attr->type = av->type;
    axon_fi_lock(domain);
    ++domain->refs;
    axon_fi_unlock(domain);
    *av_p = &av->av_fid;
    return 0;
}
