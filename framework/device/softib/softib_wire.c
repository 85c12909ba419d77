/*
 * softib's wire (softib_wire.h): opening and closing, routing a packet to
 * the shm or the UDP wire, receiving from both, and the pollable fd.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>
#include "softib_wire_priv.h"
#include "log.h"

/*
 * Wires this process opened and has not closed: at exit their segments are
 * unlinked (a forked child, which inherited the list but not the slots,
 * skips them); their slots are reaped by the next process to open the device.
 */
static pthread_mutex_t  softib_wire_open_lock = PTHREAD_MUTEX_INITIALIZER;
static axon_list_link_t softib_wire_open_list = {&softib_wire_open_list, &softib_wire_open_list};
static int              softib_wire_atexit_set;

static const char *const softib_wire_mode_names[] = {"auto", "shm", "udp"};

/* ---------------------------------------------------------------- GIDs */

void softib_wire_gid_from_ipv4(uint32_t ipv4_addr, axon_dev_gid_t *gid)
{
    memset(gid, 0, sizeof(*gid));
    gid->raw[10] = 0xff;
    gid->raw[11] = 0xff;
    memcpy(&gid->raw[12], &ipv4_addr, 4);
}

int softib_wire_gid_to_ipv4(const axon_dev_gid_t *gid, uint32_t *ipv4_addr)
{
    static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    if (memcmp(gid->raw, prefix, sizeof(prefix)) != 0) {
        return EINVAL;
    }
    memcpy(ipv4_addr, &gid->raw[12], 4);
    return 0;
}

/* ---------------------------------------------------------------- exit sweep */

static void softib_wire_atexit(void)
{
    softib_wire_t *wire;
    pid_t          pid = getpid();

    pthread_mutex_lock(&softib_wire_open_lock);
    axon_list_for_each(wire, &softib_wire_open_list, list) {
        if (wire->owner_pid == pid) {
            softib_wire_shm_unlink(wire->ring_name);
            wire->owner_pid = 0;
        }
    }
    pthread_mutex_unlock(&softib_wire_open_lock);
}

static void softib_wire_track(softib_wire_t *wire)
{
    pthread_mutex_lock(&softib_wire_open_lock);
    if (!softib_wire_atexit_set) {
        softib_wire_atexit_set = (atexit(softib_wire_atexit) == 0);
    }
    wire->owner_pid = getpid();
    axon_list_add_tail(&softib_wire_open_list, &wire->list);
    pthread_mutex_unlock(&softib_wire_open_lock);
}

static void softib_wire_untrack(softib_wire_t *wire)
{
    pthread_mutex_lock(&softib_wire_open_lock);
    axon_list_del(&wire->list);
    pthread_mutex_unlock(&softib_wire_open_lock);
}

/* ---------------------------------------------------------------- open/close */

static int softib_wire_check_params(const softib_wire_params_t *params)
{
    if (params->mode > SOFTIB_WIRE_UDP) {
        axon_error("softib: invalid wire mode %d", (int)params->mode);
        return EINVAL;
    }
    if (params->udp_port_base > 65535) {
        axon_error("softib: invalid UDP port base %u", params->udp_port_base);
        return EINVAL;
    }
    if (params->dev_index > 0xffff) {
        axon_error("softib: invalid device index %u", params->dev_index);
        return EINVAL;
    }
    return 0;
}

/* Under the registry lock: pick a slot, create its ring and socket, publish it. */
static int softib_wire_claim_slot(softib_wire_t *wire)
{
    int ret;

    ret = softib_registry_lock(wire->reg);
    if (ret != 0) {
        return ret;
    }
    softib_registry_reap(wire->reg, softib_wire_shm_unlink);
    ret = softib_registry_find_free(wire->reg, &wire->slot, &wire->gen);
    if (ret != 0) {
        goto out;
    }
    ret = softib_wire_shm_create(wire);
    if (ret != 0) {
        goto out;
    }
    if (wire->params.mode != SOFTIB_WIRE_SHM) {
        ret = softib_wire_udp_open(wire);
        if (ret != 0) {
            softib_wire_shm_destroy(wire);
            goto out;
        }
    }
    softib_registry_publish(wire->reg, wire->slot, wire->gen, wire->ring_name);
out:
    softib_registry_unlock(wire->reg);
    return ret;
}

static int softib_wire_epoll_add(softib_wire_t *wire, int fd)
{
    struct epoll_event ev;

    memset(&ev, 0, sizeof(ev));
    ev.events  = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(wire->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        int ret = errno;

        axon_error("softib: cannot watch fd %d: %s", fd, strerror(ret));
        return ret;
    }
    return 0;
}

int softib_wire_open(const softib_wire_params_t *params, softib_wire_t **wire_p)
{
    softib_wire_t *wire;
    int            ret;

    if ((params == NULL) || (wire_p == NULL)) {
        axon_error("softib: wire open without %s", (params == NULL) ? "params" : "wire_p");
        return EINVAL;
    }
    ret = softib_wire_check_params(params);
    if (ret != 0) {
        return ret;
    }

    wire = calloc(1, sizeof(*wire));
    if (wire == NULL) {
        return ENOMEM;
    }
    wire->params   = *params;
    wire->bell_fd  = -1;
    wire->udp_fd   = -1;
    wire->epoll_fd = -1;
    wire->creator_pid = getpid();
    axon_list_init(&wire->list);
    if (wire->params.ipv4_addr == 0) {
        wire->params.ipv4_addr = htonl(INADDR_LOOPBACK);
    }
    softib_wire_gid_from_ipv4(wire->params.ipv4_addr, &wire->gid);

    ret = softib_wire_inject_init(&wire->inject, params);
    if (ret != 0) {
        goto err_free;
    }
    /* Left as calloc gives it (untouched pages): an entry is set when mapped. */
    wire->peers = calloc(SOFTIB_REGISTRY_SLOT_MAX + 1, sizeof(*wire->peers));
    if (wire->peers == NULL) {
        ret = ENOMEM;
        goto err_inject;
    }

    ret = softib_registry_open(params->dev_index, &wire->reg);
    if (ret != 0) {
        goto err_peers;
    }
    ret = softib_wire_claim_slot(wire);
    if (ret != 0) {
        goto err_registry;
    }

    wire->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (wire->epoll_fd < 0) {
        ret = errno;
        axon_error("softib: epoll_create1 failed: %s", strerror(ret));
        goto err_slot;
    }
    ret = softib_wire_epoll_add(wire, wire->bell_fd);
    if ((ret == 0) && (wire->udp_fd >= 0)) {
        ret = softib_wire_epoll_add(wire, wire->udp_fd);
    }
    if (ret != 0) {
        goto err_slot;
    }

    softib_wire_track(wire);
    axon_debug("softib%u: wire open, slot %u, mode %s", params->dev_index, wire->slot,
               softib_wire_mode_names[params->mode]);
    *wire_p = wire;
    return 0;

err_slot:
    if (wire->epoll_fd >= 0) {
        close(wire->epoll_fd);
    }
    softib_wire_udp_close(wire);
    softib_wire_shm_destroy(wire);
    if (softib_registry_lock(wire->reg) == 0) {
        softib_registry_release(wire->reg, wire->slot, wire->gen);
        softib_registry_unlock(wire->reg);
    }
err_registry:
    softib_registry_close(wire->reg);
err_peers:
    free(wire->peers);
err_inject:
    softib_wire_inject_cleanup(&wire->inject);
err_free:
    free(wire);
    return ret;
}

void softib_wire_close(softib_wire_t *wire)
{
    if (wire == NULL) {
        return;
    }
    softib_wire_untrack(wire);
    close(wire->epoll_fd);
    if (wire->creator_pid == getpid()) {
        softib_wire_inject_progress(wire, 1);   /* what reorder still holds leaves now */
        softib_wire_udp_close(wire);
        /* Free the slot first: senders that see it free stop using our ring. */
        if (softib_registry_lock(wire->reg) == 0) {
            softib_registry_release(wire->reg, wire->slot, wire->gen);
            softib_registry_unlock(wire->reg);
        }
        softib_wire_shm_destroy(wire);
    } else {
        /* A forked child's copy: the slot, ring and port stay the parent's. */
        softib_wire_udp_close(wire);
        softib_wire_shm_forget_ring(wire);
    }
    softib_wire_shm_forget_peers(wire);
    softib_registry_close(wire->reg);
    free(wire->peers);
    softib_wire_inject_cleanup(&wire->inject);
    free(wire);
}

unsigned softib_wire_slot(const softib_wire_t *wire)
{
    return wire->slot;
}

uint32_t softib_wire_next_qp_index(const softib_wire_t *wire)
{
    return softib_registry_next_qp_index(wire->reg, wire->slot);
}

void softib_wire_set_next_qp_index(softib_wire_t *wire, uint32_t index)
{
    softib_registry_set_next_qp_index(wire->reg, wire->slot, index);
}

void softib_wire_gid(const softib_wire_t *wire, axon_dev_gid_t *gid)
{
    *gid = wire->gid;
}

uint64_t softib_wire_owner_gen(const softib_wire_t *wire, const axon_dev_gid_t *gid,
                               uint32_t qpn)
{
    if (memcmp(gid->raw, wire->gid.raw, sizeof(gid->raw)) != 0) {
        return 0;   /* another host's registry is not ours to read */
    }
    return softib_registry_gen(wire->reg, SOFTIB_QPN_SLOT(qpn));
}

int softib_wire_slot_held(const softib_wire_t *wire, unsigned slot, uint64_t gen,
                          int check_owner)
{
    char ring[SOFTIB_REGISTRY_NAME_LEN];
    softib_registry_owner_t owner;
    const char *why;
    uint64_t now;

    if (softib_registry_gen(wire->reg, slot) != gen) {
        return 0;
    }
    if (!check_owner) {
        return 1;
    }
    if ((softib_registry_lookup(wire->reg, slot, &now, ring, sizeof(ring), &owner) != 0) ||
        (now != gen)) {
        return 0;
    }
    return !softib_registry_owner_gone(&owner, &why);
}

/* ---------------------------------------------------------------- data path */

/* Does dgid go by the shm wire (forced, or auto and our own GID)? */
static int softib_wire_by_shm(const softib_wire_t *wire, const axon_dev_gid_t *dgid)
{
    return (wire->params.mode == SOFTIB_WIRE_SHM) ||
           ((wire->params.mode == SOFTIB_WIRE_AUTO) &&
            (memcmp(dgid->raw, wire->gid.raw, sizeof(dgid->raw)) == 0));
}

static int softib_wire_slot_valid(unsigned slot)
{
    return (slot >= SOFTIB_REGISTRY_SLOT_MIN) && (slot <= SOFTIB_REGISTRY_SLOT_MAX);
}

int softib_wire_send_now(softib_wire_t *wire, const axon_dev_gid_t *dgid, uint32_t dest_qpn,
                         const softib_wire_pkt_t *pkt)
{
    unsigned slot = SOFTIB_QPN_SLOT(dest_qpn);
    uint32_t ipv4_addr;

    if (softib_wire_by_shm(wire, dgid)) {
        return softib_wire_shm_send(wire, slot, pkt);
    }
    softib_wire_gid_to_ipv4(dgid, &ipv4_addr);   /* checked by softib_wire_sendv */
    return softib_wire_udp_send(wire, ipv4_addr, slot, pkt);
}

/* Refuse what can never be delivered, before injection may hold it. */
static int softib_wire_check_send(softib_wire_t *wire, const axon_dev_gid_t *dgid,
                                  uint32_t dest_qpn, const softib_wire_pkt_t *pkt)
{
    unsigned slot = SOFTIB_QPN_SLOT(dest_qpn);
    size_t   len  = pkt->hlen + pkt->paylen;
    uint32_t ipv4_addr;

    if ((len == 0) || (len > SOFTIB_WIRE_MAX_PKT) || (pkt->hlen == 0) || (pkt->hdr == NULL) ||
        ((pkt->paylen != 0) && (pkt->pay == NULL))) {
        axon_error("softib: cannot send a packet of %zu bytes (1..%u)", len,
                   (unsigned)SOFTIB_WIRE_MAX_PKT);
        return EINVAL;
    }
    if ((dgid == NULL) || !softib_wire_slot_valid(slot)) {
        axon_error("softib: cannot route to QP 0x%x (slot %u)", dest_qpn, slot);
        return EINVAL;
    }
    if ((wire->params.mode != SOFTIB_WIRE_SHM) &&
        (softib_wire_gid_to_ipv4(dgid, &ipv4_addr) != 0)) {
        char str[INET6_ADDRSTRLEN];

        inet_ntop(AF_INET6, dgid->raw, str, sizeof(str));
        axon_error("softib: cannot route to GID %s: not an IPv4-mapped address", str);
        return EINVAL;
    }
    return 0;
}

int softib_wire_sendv(softib_wire_t *wire, const axon_dev_gid_t *dgid, uint32_t dest_qpn,
                      const softib_wire_pkt_t *pkt)
{
    int ret = softib_wire_check_send(wire, dgid, dest_qpn, pkt);

    if (ret != 0) {
        return ret;
    }
    if (wire->inject.enabled) {
        return softib_wire_inject_send(wire, dgid, dest_qpn, pkt);
    }
    return softib_wire_send_now(wire, dgid, dest_qpn, pkt);
}

int softib_wire_send(softib_wire_t *wire, const axon_dev_gid_t *dgid, uint32_t dest_qpn,
                     const void *pkt, size_t len)
{
    softib_wire_pkt_t p = {pkt, len, NULL, 0};

    return softib_wire_sendv(wire, dgid, dest_qpn, &p);
}

softib_direct_table_t *softib_wire_direct_table(softib_wire_t *wire)
{
    return (wire->params.mode == SOFTIB_WIRE_UDP) ? NULL : softib_wire_shm_direct_table(wire);
}

int softib_wire_direct_peer(softib_wire_t *wire, const axon_dev_gid_t *dgid, uint32_t dest_qpn,
                            softib_direct_table_t **table_p, pid_t *pid_p)
{
    unsigned slot = SOFTIB_QPN_SLOT(dest_qpn);

    /* Injected faults are for the packets: their tests must see every byte go by them. */
    if (wire->inject.enabled || !softib_wire_by_shm(wire, dgid) || !softib_wire_slot_valid(slot)) {
        return ENOENT;
    }
    return softib_wire_shm_direct_peer(wire, slot, table_p, pid_p);
}

ssize_t softib_wire_recv(softib_wire_t *wire, void *buf, const uint8_t **pkt_p,
                         axon_dev_gid_t *src_gid)
{
    ssize_t n = softib_wire_shm_peek(wire, pkt_p, src_gid);

    if ((n != 0) || (wire->udp_fd < 0)) {
        return n;
    }
    *pkt_p = buf;
    /*
     * An empty socket costs a system call per look: while no datagram came
     * lately look only every SOFTIB_WIRE_UDP_COLD-th time (the progress
     * thread's epoll and softib_wire_disarm() make it hot at once).
     */
    if (wire->udp_hot == 0) {
        if (++wire->udp_skip < SOFTIB_WIRE_UDP_COLD) {
            return 0;
        }
        wire->udp_skip = 0;
    }
    n = softib_wire_udp_recv(wire, buf, src_gid);
    if (n > 0) {
        wire->udp_hot = SOFTIB_WIRE_UDP_HOT;
    } else if (wire->udp_hot > 0) {
        --wire->udp_hot;
    }
    return n;
}

void softib_wire_recv_done(softib_wire_t *wire)
{
    if (wire->holding) {
        softib_wire_shm_release(wire);
    }
}

void softib_wire_progress(softib_wire_t *wire, uint64_t now_ns)
{
    if (wire->inject.nheld > 0) {
        softib_wire_inject_progress(wire, 0);
    }
    if (wire->params.mode != SOFTIB_WIRE_UDP) {
        softib_wire_shm_sweep(wire, now_ns);
    }
}

uint64_t softib_wire_next_due_ns(const softib_wire_t *wire)
{
    uint64_t due = 0;
    unsigned i;

    for (i = 0; i < wire->inject.nheld; ++i) {
        if ((due == 0) || (wire->inject.held[i].due_ns < due)) {
            due = wire->inject.held[i].due_ns;
        }
    }
    /* Mapped rings are checked for gone owners even when nothing else happens. */
    if ((wire->num_mapped > 0) && ((due == 0) || (wire->sweep_ns + SOFTIB_WIRE_SWEEP_NS < due))) {
        due = wire->sweep_ns + SOFTIB_WIRE_SWEEP_NS;
    }
    return due;
}

int softib_wire_fd(const softib_wire_t *wire)
{
    return wire->epoll_fd;
}

int softib_wire_arm(softib_wire_t *wire)
{
    softib_wire_shm_arm(wire);
    /* The UDP socket needs no arming: epoll reports it while data waits. */
    return softib_wire_shm_pending(wire);
}

void softib_wire_disarm(softib_wire_t *wire)
{
    softib_wire_shm_disarm(wire);
    /* woken, maybe by the socket: look at it on the next receives */
    wire->udp_hot = SOFTIB_WIRE_UDP_HOT;
}
