/*
 * Address vector: fi_addr_t is an index into a table of peers for both
 * FI_AV_MAP and FI_AV_TABLE. A peer is one Axon endpoint, created from the
 * worker address its name stands for; inserting the same name again gives a
 * new index for the same peer (reference counted). Two maps serve the data
 * path: name token -> peer (duplicates) and sender id -> fi_addr (FI_SOURCE).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "axon_fi.h"

#define AXON_FI_CLOSE_WAIT_MS 2000   /* flushing endpoints at AV close, at most */

/* ---------------------------------------------------------------- u64 map */

static size_t axon_fi_map_slot(const axon_fi_map_t *map, uint64_t key)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (size_t)key & (map->cap - 1);
}

static int axon_fi_map_resize(axon_fi_map_t *map, size_t cap)
{
    axon_fi_map_t bigger = {calloc(cap, sizeof(uint64_t)), calloc(cap, sizeof(uint64_t)), cap, 0};
    size_t i;

    if ((bigger.keys == NULL) || (bigger.vals == NULL)) {
        free(bigger.keys);
        free(bigger.vals);
        return -FI_ENOMEM;
    }
    for (i = 0; i < map->cap; ++i) {
        if (map->keys[i] != 0) {
            axon_fi_map_put(&bigger, map->keys[i], map->vals[i]);
        }
    }
    axon_fi_map_free(map);
    *map = bigger;
    return 0;
}

int axon_fi_map_put(axon_fi_map_t *map, uint64_t key, uint64_t val)
{
    size_t i;
    int ret;

    if (((map->count + 1) * 2 > map->cap) &&
        ((ret = axon_fi_map_resize(map, map->cap ? map->cap * 2 : 64)) != 0)) {
        return ret;
    }
    for (i = axon_fi_map_slot(map, key); map->keys[i] != 0; i = (i + 1) & (map->cap - 1)) {
        if (map->keys[i] == key) {
            map->vals[i] = val;
            return 0;
        }
    }
    map->keys[i] = key;
    map->vals[i] = val;
    ++map->count;
    return 0;
}

int axon_fi_map_get(const axon_fi_map_t *map, uint64_t key, uint64_t *val)
{
    size_t i;

    if (map->cap == 0) {
        return 0;
    }
    for (i = axon_fi_map_slot(map, key); map->keys[i] != 0; i = (i + 1) & (map->cap - 1)) {
        if (map->keys[i] == key) {
            *val = map->vals[i];
            return 1;
        }
    }
    return 0;
}

void axon_fi_map_del(axon_fi_map_t *map, uint64_t key)
{
    size_t i, j, home;

    if (map->cap == 0) {
        return;
    }
    for (i = axon_fi_map_slot(map, key); map->keys[i] != key; i = (i + 1) & (map->cap - 1)) {
        if (map->keys[i] == 0) {
            return;
        }
    }
    /* Backward-shift deletion keeps probe chains intact without tombstones. */
    for (j = (i + 1) & (map->cap - 1); map->keys[j] != 0; j = (j + 1) & (map->cap - 1)) {
        home = axon_fi_map_slot(map, map->keys[j]);
        if (((j > i) && ((home <= i) || (home > j))) || ((j < i) && (home <= i) && (home > j))) {
            map->keys[i] = map->keys[j];
            map->vals[i] = map->vals[j];
            i = j;
        }
    }
    map->keys[i] = 0;
    --map->count;
}

void axon_fi_map_free(axon_fi_map_t *map)
{
    free(map->keys);
    free(map->vals);
    memset(map, 0, sizeof(*map));
}

/* ---------------------------------------------------------------- peers */

fi_addr_t axon_fi_av_sender_addr(axon_fi_av_t *av, uint64_t sender)
{
    uint64_t addr;

    return axon_fi_map_get(&av->by_sender, sender, &addr) ? (fi_addr_t)addr : FI_ADDR_NOTAVAIL;
}

static void axon_fi_peer_failed(void *arg, axon_ep_h ep, axon_status_t status)
{
    axon_fi_peer_t *peer = arg;

    peer->failed = status;
    AXON_FI_INFO(FI_LOG_AV, "peer %016llx failed: %s", (unsigned long long)peer->name.token,
                 axon_status_string(status));
}

static int axon_fi_peer_create(axon_fi_av_t *av, const axon_fi_name_t *name, fi_addr_t addr,
                               axon_fi_peer_t **peer_p)
{
    axon_fi_peer_t *peer;
    axon_ep_params_t params;
    axon_status_t status;
    void *worker_addr;
    size_t len;
    int ret;

    peer = calloc(1, sizeof(*peer));
    if (peer == NULL) {
        return -FI_ENOMEM;
    }
    if (name->token == av->domain->name.token) {
        /* Our own name: no need to ask the server. */
        worker_addr = av->domain->worker_addr;
        len         = av->domain->worker_addr_len;
    } else if ((ret = axon_fi_addr_fetch(name, &worker_addr, &len)) != 0) {
        free(peer);
        return ret;
    }
    params.address        = worker_addr;
    params.address_length = len;
    params.err_cb         = axon_fi_peer_failed;
    params.err_cb_arg     = peer;
    status = axon_ep_create(av->domain->worker, &params, &peer->ep);
    if (worker_addr != av->domain->worker_addr) {
        free(worker_addr);
    }
    if (status != AXON_OK) {
        AXON_FI_WARN(FI_LOG_AV, "axon_ep_create for peer %016llx failed: %s",
                     (unsigned long long)name->token, axon_status_string(status));
        free(peer);
        return -axon_fi_errno(status);
    }
    peer->name    = *name;
    peer->peer_id = axon_ep_peer_id(peer->ep);
    peer->first   = addr;
    if ((axon_fi_map_put(&av->by_token, name->token, (uintptr_t)peer) != 0) ||
        ((peer->peer_id != AXON_SENDER_ANY) &&
         (axon_fi_map_put(&av->by_sender, peer->peer_id, addr) != 0))) {
        axon_fi_map_del(&av->by_token, name->token);
        axon_ep_close_nb(peer->ep, AXON_EP_CLOSE_FORCE, NULL);
        free(peer);
        return -FI_ENOMEM;
    }
    *peer_p = peer;
    return 0;
}

/* Drop one reference; the last closes the endpoint (a flush the worker finishes). */
static void axon_fi_peer_release(axon_fi_av_t *av, axon_fi_peer_t *peer,
                                 axon_request_h *close_req)
{
    axon_request_h req = NULL;
    uint64_t addr;

    if (--peer->refs > 0) {
        return;
    }
    axon_fi_map_del(&av->by_token, peer->name.token);
    if (axon_fi_map_get(&av->by_sender, peer->peer_id, &addr) && (addr == peer->first)) {
        axon_fi_map_del(&av->by_sender, peer->peer_id);
    }
    if ((axon_ep_close_nb(peer->ep, (peer->failed == AXON_OK) ? AXON_EP_CLOSE_FLUSH :
                                    AXON_EP_CLOSE_FORCE, &req) == AXON_INPROGRESS)) {
        if (close_req != NULL) {
            *close_req = req;
        } else {
            axon_request_free(req);
        }
    }
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

/* ---------------------------------------------------------------- AV ops */

static int axon_fi_av_insert(struct fid_av *av_fid, const void *addr, size_t count,
                             fi_addr_t *fi_addr, uint64_t flags, void *context)
{
    axon_fi_av_t *av = container_of(av_fid, axon_fi_av_t, av_fid);
    axon_fi_domain_t *domain = av->domain;
    const uint8_t *names = addr;
    axon_fi_peer_t *peer = NULL;
    axon_fi_name_t name;
    uint64_t found;
    int *errs = (flags & FI_SYNC_ERR) ? context : NULL;
    int ret, done = 0;
    size_t i;

    if (flags & ~(uint64_t)(FI_MORE | FI_SYNC_ERR)) {
        AXON_FI_WARN(FI_LOG_AV, "fi_av_insert flags 0x%llx not supported",
                     (unsigned long long)flags);
        return -FI_EINVAL;
    }
    if ((addr == NULL) && (count > 0)) {
        return -FI_EINVAL;
    }
    axon_fi_lock(domain);
    ret = axon_fi_av_grow(av, av->count + count);
    if (ret != 0) {
        axon_fi_unlock(domain);
        return ret;
    }
    for (i = 0; i < count; ++i) {
        fi_addr_t index = av->count;

        ret = axon_fi_name_check(names + i * sizeof(axon_fi_name_t), sizeof(axon_fi_name_t),
                                 &name);
        if (ret == 0) {
            if (axon_fi_map_get(&av->by_token, name.token, &found)) {
                peer = (axon_fi_peer_t *)(uintptr_t)found;
            } else {
                ret = axon_fi_peer_create(av, &name, index, &peer);
            }
        }
        if (ret == 0) {
            ++peer->refs;
            av->table[av->count++] = peer;
            ++done;
        } else {
            index = FI_ADDR_NOTAVAIL;
            if (av->eq != NULL) {
                struct fi_eq_err_entry err = {.fid = &av->av_fid.fid, .context = context,
                                              .data = i, .err = -ret};
                axon_fi_eq_post(av->eq, FI_AV_COMPLETE, &err, sizeof(err), 1);
            }
        }
        if (fi_addr != NULL) {
            fi_addr[i] = index;
        }
        if (errs != NULL) {
            errs[i] = -ret;
        }
    }
    axon_fi_unlock(domain);

    if (av->eq != NULL) {
        struct fi_eq_entry entry = {.fid = &av->av_fid.fid, .context = context,
                                    .data = (uint64_t)done};
        axon_fi_eq_post(av->eq, FI_AV_COMPLETE, &entry, sizeof(entry), 0);
        return 0;
    }
    return done;
}

static int axon_fi_av_insertsvc(struct fid_av *av, const char *node, const char *service,
                                fi_addr_t *fi_addr, uint64_t flags, void *context)
{
    AXON_FI_WARN(FI_LOG_AV, "fi_av_insertsvc(%s, %s): axon names are not host/service pairs",
                 node ? node : "NULL", service ? service : "NULL");
    return -FI_ENOSYS;
}

static int axon_fi_av_insertsym(struct fid_av *av, const char *node, size_t nodecnt,
                                const char *service, size_t svccnt, fi_addr_t *fi_addr,
                                uint64_t flags, void *context)
{
    return axon_fi_av_insertsvc(av, node, service, fi_addr, flags, context);
}

static int axon_fi_av_remove(struct fid_av *av_fid, fi_addr_t *fi_addr, size_t count,
                             uint64_t flags)
{
    axon_fi_av_t *av = container_of(av_fid, axon_fi_av_t, av_fid);
    axon_fi_peer_t *peer;
    int ret = 0;
    size_t i;

    axon_fi_lock(av->domain);
    for (i = 0; i < count; ++i) {
        peer = axon_fi_av_peer(av, fi_addr[i]);
        if (peer == NULL) {
            AXON_FI_WARN(FI_LOG_AV, "fi_av_remove: fi_addr %llu is not in the AV",
                         (unsigned long long)fi_addr[i]);
            ret = -FI_EINVAL;
            continue;
        }
        av->table[fi_addr[i]] = NULL;
        axon_fi_peer_release(av, peer, NULL);
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

    if (axon_fi_name_check(addr, sizeof(name), &name) != 0) {
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
    axon_request_h *reqs;
    struct timespec start, now;
    size_t i, nreqs = 0, pending;

    if (av->refs > 0) {
        AXON_FI_WARN(FI_LOG_AV, "AV still bound to %d endpoints", av->refs);
        return -FI_EBUSY;
    }
    axon_fi_lock(domain);
    reqs = calloc(av->count + 1, sizeof(*reqs));
    for (i = 0; i < av->count; ++i) {
        if (av->table[i] != NULL) {
            axon_request_h req = NULL;
            axon_fi_peer_release(av, av->table[i], (reqs != NULL) ? &req : NULL);
            if (req != NULL) {
                reqs[nreqs++] = req;
            }
        }
    }
    /* Let queued sends leave before the worker goes; a dead peer does not hold us long. */
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        axon_worker_progress(domain->worker);
        for (i = 0, pending = 0; i < nreqs; ++i) {
            pending += (axon_request_test(reqs[i], NULL) == AXON_INPROGRESS);
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (pending && ((now.tv_sec - start.tv_sec) * 1000 +
                         (now.tv_nsec - start.tv_nsec) / 1000000 < AXON_FI_CLOSE_WAIT_MS));
    for (i = 0; i < nreqs; ++i) {
        axon_request_free(reqs[i]);
    }
    free(reqs);
    --domain->refs;
    axon_fi_unlock(domain);

    if (av->eq != NULL) {
        pthread_mutex_lock(&av->eq->lock);
        --av->eq->refs;
        pthread_mutex_unlock(&av->eq->lock);
    }
    axon_fi_map_free(&av->by_token);
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
