/*
 * UD multicast (seed §4.6.13-14): the groups a UD QP attaches to, and the
 * fan-out of a send to one.
 *
 * A device's groups live in a host-wide segment beside its slot registry
 * ("/axon-softib<N>.mcast"), so processes that share /dev/shm share them,
 * network namespaces included: a group is an MGID and its members, each a
 * QP number, the registry generation of the slot its process held when it
 * attached (a member whose slot moved on belonged to a process that is
 * gone, and is dropped where it is found) and the GID its device had. A
 * send to a group sends one copy of the packet to each member, over the
 * wire that reaches the member's GID, with the MGID in the packet for the
 * receiver's GRH. There is no subnet manager to join through: attaching is
 * joining. Hosts that do not share /dev/shm do not see each other's
 * members (a group ends at its host, like a switch without uplinks).
 *
 * Writers and senders take the segment's robust lock; a sender copies the
 * members out under it and sends after. All of it is slow path.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include "softib_pkt.h"
#include "softib_registry.h"
#include "log.h"

#define SOFTIB_MCAST_MAGIC 0x53424d4341303031ull   /* "SBMCA001" */

typedef struct softib_mcast_member {
    uint32_t       qpn;
    uint32_t       reserved;
    uint64_t       gen;        /* its slot's registry generation when it attached */
    axon_dev_gid_t gid;        /* its device's */
} softib_mcast_member_t;

typedef struct softib_mcast_group {
    axon_dev_gid_t        mgid;
    uint32_t              count;   /* 0: the entry is free */
    uint32_t              reserved;
    softib_mcast_member_t members[SOFTIB_MCAST_MEMBERS];
} softib_mcast_group_t;

struct softib_mcast_seg {
    _Atomic uint64_t     magic;    /* written last by the initializer */
    uint32_t             ngroups;
    uint32_t             nmembers;
    pthread_mutex_t      lock;
    softib_mcast_group_t groups[SOFTIB_MCAST_GROUPS];
};

/* ---------------------------------------------------------------- segment */

static int softib_mcast_init_seg(void *addr, const char *name)
{
    struct softib_mcast_seg *seg = addr;
    int ret;

    if (atomic_load_explicit(&seg->magic, memory_order_acquire) == SOFTIB_MCAST_MAGIC) {
        if ((seg->ngroups != SOFTIB_MCAST_GROUPS) || (seg->nmembers != SOFTIB_MCAST_MEMBERS)) {
            axon_error("softib: %s has another layout (%u groups of %u members): "
                       "left by another version of axon?", name, seg->ngroups, seg->nmembers);
            return EPROTO;
        }
        return 0;
    }
    memset(seg, 0, sizeof(*seg));
    if ((ret = softib_shared_lock_init(&seg->lock)) != 0) {
        axon_error("softib: cannot initialize the lock of %s: %s", name, strerror(ret));
        return ret;
    }
    seg->ngroups  = SOFTIB_MCAST_GROUPS;
    seg->nmembers = SOFTIB_MCAST_MEMBERS;
    atomic_store_explicit(&seg->magic, SOFTIB_MCAST_MAGIC, memory_order_release);
    return 0;
}

/* The device's groups, mapped at first use. Device lock held. */
static int softib_mcast_seg(softib_dev_t *dev, struct softib_mcast_seg **seg_p)
{
    char name[32];
    void *seg;
    int ret;

    if (dev->mcast == NULL) {
        snprintf(name, sizeof(name), "/axon-softib%u.mcast", dev->index);
        if ((ret = softib_shared_seg_open(name, sizeof(struct softib_mcast_seg),
                                          softib_mcast_init_seg, &seg)) != 0) {
            return ret;
        }
        dev->mcast = seg;
    }
    *seg_p = dev->mcast;
    return softib_shared_lock(&dev->mcast->lock, "softib multicast groups");
}

void softib_mcast_close(softib_dev_t *dev)
{
    if (dev->mcast != NULL) {
        munmap(dev->mcast, sizeof(struct softib_mcast_seg));
        dev->mcast = NULL;
    }
}

/* ---------------------------------------------------------------- groups */

int softib_gid_is_mcast(const axon_dev_gid_t *gid)
{
    static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    /* an IPv6 multicast address, or IPv4 multicast (224.0.0.0/4) mapped, as RoCE has it */
    return (gid->raw[0] == 0xff) ||
           (!memcmp(gid->raw, v4_mapped, sizeof(v4_mapped)) && ((gid->raw[12] & 0xf0) == 0xe0));
}

static softib_mcast_group_t *softib_mcast_find(struct softib_mcast_seg *seg,
                                               const axon_dev_gid_t *mgid)
{
    unsigned i;

    for (i = 0; i < SOFTIB_MCAST_GROUPS; i++) {
        if (seg->groups[i].count && !memcmp(seg->groups[i].mgid.raw, mgid->raw, 16)) {
            return &seg->groups[i];
        }
    }
    return NULL;
}

/*
 * Drop the members whose process is gone: their slot's generation moved, or
 * (thorough: where a place is needed, the slow path) its owner died without
 * releasing it. Lock held.
 */
static void softib_mcast_reap(softib_dev_t *dev, softib_mcast_group_t *group, int thorough)
{
    softib_mcast_member_t *m;
    uint32_t i = 0;

    while (i < group->count) {
        m = &group->members[i];
        if (softib_wire_slot_held(dev->wire, SOFTIB_QPN_SLOT(m->qpn), m->gen, thorough)) {
            i++;
            continue;
        }
        axon_debug("softib: multicast: member QP 0x%x left with its process", m->qpn);
        *m = group->members[--group->count];
    }
}

/* The registry generation of our slot, which our members carry. */
static uint64_t softib_mcast_gen(const softib_dev_t *dev, const softib_qp_t *qp)
{
    return softib_wire_owner_gen(dev->wire, &dev->gid, qp->super.qp_num);
}

static int softib_mcast_member_is(const softib_mcast_member_t *m, const softib_qp_t *qp,
                                  uint64_t gen)
{
    return (m->qpn == qp->super.qp_num) && (m->gen == gen);
}

/* A free group entry; when none, the groups whose members all died give theirs back. */
static softib_mcast_group_t *softib_mcast_unused(softib_dev_t *dev, struct softib_mcast_seg *seg)
{
    unsigned i, pass;

    for (pass = 0; pass < 2; pass++) {
        for (i = 0; i < SOFTIB_MCAST_GROUPS; i++) {
            if (pass == 1) {
                softib_mcast_reap(dev, &seg->groups[i], 1);
            }
            if (seg->groups[i].count == 0) {
                return &seg->groups[i];
            }
        }
    }
    return NULL;
}

static int softib_mcast_check(const axon_dev_qp_t *aqp, const axon_dev_gid_t *gid,
                              const char *what)
{
    const softib_dev_t *dev = softib_dev(aqp->context);

    if (!(dev->attr.cap_flags & AXON_DEV_CAP_MCAST)) {
        axon_error("softib: %s: multicast is disabled on %s (AXON_SOFTIB_CAP_MASK)", what,
                   aqp->context->name);
        return EOPNOTSUPP;
    }
    if (gid == NULL) {
        axon_error("softib: %s: NULL gid", what);
        return EINVAL;
    }
    if (aqp->qp_type != AXON_DEV_QPT_UD) {
        axon_error("softib: %s: QP 0x%x is not UD (only UD QPs join multicast groups)", what,
                   aqp->qp_num);
        return EINVAL;
    }
    if (!softib_gid_is_mcast(gid)) {
        axon_error("softib: %s: GID %02x%02x:...:%02x%02x is not a multicast GID (ff00::/8, "
                   "or ::ffff:224.0.0.0/100)", what, gid->raw[0], gid->raw[1], gid->raw[14],
                   gid->raw[15]);
        return EINVAL;
    }
    return 0;
}

static int softib_mcast_attach_locked(softib_dev_t *dev, struct softib_mcast_seg *seg,
                                      softib_qp_t *qp, const axon_dev_gid_t *mgid)
{
    uint64_t gen = softib_mcast_gen(dev, qp);
    softib_mcast_group_t *group = softib_mcast_find(seg, mgid);
    softib_mcast_member_t *m;
    uint32_t i;

    if (group == NULL) {
        if ((group = softib_mcast_unused(dev, seg)) == NULL) {
            axon_error("softib: attach_mcast: all %d multicast groups of %s are in use",
                       SOFTIB_MCAST_GROUPS, dev->super.name);
            return ENOMEM;
        }
        group->mgid = *mgid;
    } else {
        softib_mcast_reap(dev, group, group->count == SOFTIB_MCAST_MEMBERS);
        for (i = 0; i < group->count; i++) {
            if (softib_mcast_member_is(&group->members[i], qp, gen)) {
                return 0;   /* attached already: still one copy (§4.6.13) */
            }
        }
        if (group->count == SOFTIB_MCAST_MEMBERS) {
            axon_error("softib: attach_mcast: the group has its %d QPs already",
                       SOFTIB_MCAST_MEMBERS);
            return ENOMEM;
        }
    }
    m      = &group->members[group->count];
    m->qpn = qp->super.qp_num;
    m->gen = gen;
    m->gid = dev->gid;
    group->count++;   /* the entry is in use from here (the lock orders it) */
    qp->mcast_groups++;
    return 0;
}

/* Take qp out of group (1 if it was there). Lock held. */
static int softib_mcast_leave(softib_qp_t *qp, uint64_t gen, softib_mcast_group_t *group)
{
    uint32_t i;

    for (i = 0; i < group->count; i++) {
        if (softib_mcast_member_is(&group->members[i], qp, gen)) {
            group->members[i] = group->members[--group->count];
            qp->mcast_groups--;
            return 1;
        }
    }
    return 0;
}

int softib_attach_mcast(axon_dev_qp_t *aqp, const axon_dev_gid_t *gid, uint16_t lid)
{
    softib_dev_t *dev = softib_dev(aqp->context);
    struct softib_mcast_seg *seg;
    int ret;

    (void)lid;   /* the link layer is Ethernet's (RoCE): groups go by GID */
    if ((ret = softib_mcast_check(aqp, gid, "attach_mcast")) != 0) {
        return ret;
    }
    pthread_mutex_lock(&dev->lock);
    if ((ret = softib_mcast_seg(dev, &seg)) == 0) {
        ret = softib_mcast_attach_locked(dev, seg, softib_qp(aqp), gid);
        pthread_mutex_unlock(&seg->lock);
    }
    pthread_mutex_unlock(&dev->lock);
    return ret;
}

int softib_detach_mcast(axon_dev_qp_t *aqp, const axon_dev_gid_t *gid, uint16_t lid)
{
    softib_dev_t *dev = softib_dev(aqp->context);
    softib_qp_t *qp   = softib_qp(aqp);
    struct softib_mcast_seg *seg;
    softib_mcast_group_t *group;
    int ret;

    (void)lid;
    if ((ret = softib_mcast_check(aqp, gid, "detach_mcast")) != 0) {
        return ret;
    }
    pthread_mutex_lock(&dev->lock);
    if ((ret = softib_mcast_seg(dev, &seg)) == 0) {
        group = softib_mcast_find(seg, gid);
        if ((group == NULL) ||
            !softib_mcast_leave(qp, softib_mcast_gen(dev, qp), group)) {
            axon_error("softib: detach_mcast: QP 0x%x is not attached to that group",
                       aqp->qp_num);
            ret = EINVAL;
        }
        pthread_mutex_unlock(&seg->lock);
    }
    pthread_mutex_unlock(&dev->lock);
    return ret;
}

void softib_mcast_qp_destroyed(softib_dev_t *dev, softib_qp_t *qp)
{
    struct softib_mcast_seg *seg;
    uint64_t gen;
    unsigned i;

    if (!qp->mcast_groups || (softib_mcast_seg(dev, &seg) != 0)) {
        return;
    }
    gen = softib_mcast_gen(dev, qp);
    for (i = 0; (i < SOFTIB_MCAST_GROUPS) && qp->mcast_groups; i++) {
        softib_mcast_leave(qp, gen, &seg->groups[i]);
    }
    pthread_mutex_unlock(&seg->lock);
}

/* ---------------------------------------------------------------- send */

int softib_mcast_send(softib_dev_t *dev, softib_qp_t *qp, const axon_dev_gid_t *mgid,
                      size_t hlen, const void *pay, size_t paylen)
{
    softib_mcast_member_t members[SOFTIB_MCAST_MEMBERS];
    struct softib_mcast_seg *seg;
    softib_mcast_group_t *group;
    uint32_t i, count = 0;

    if (softib_mcast_seg(dev, &seg) != 0) {
        return 0;   /* logged; the packet is lost, as a UD packet may be */
    }
    if ((group = softib_mcast_find(seg, mgid)) != NULL) {
        softib_mcast_reap(dev, group, 0);
        count = group->count;
        memcpy(members, group->members, count * sizeof(members[0]));
    }
    pthread_mutex_unlock(&seg->lock);
    for (i = 0; i < count; i++) {
        if ((qp->create_flags & AXON_DEV_QP_CREATE_BLOCK_SELF_MCAST_LB) &&
            (members[i].qpn == qp->super.qp_num) &&
            !memcmp(members[i].gid.raw, dev->gid.raw, sizeof(dev->gid.raw))) {
            continue;   /* not back to itself */
        }
        softib_pkt_set_dest_qpn(dev->tx_buf, members[i].qpn);
        if (softib_send_pkt_pay(dev, qp, &members[i].gid, members[i].qpn, hlen, pay,
                                paylen) != 0) {
            /* a member's full ring drops its copy: unreliable, and no member
             * may hold the others back */
            axon_debug("softib: QP 0x%x: multicast copy to QP 0x%x dropped",
                       qp->super.qp_num, members[i].qpn);
        }
    }
    return 0;
}
