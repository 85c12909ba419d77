/*
 * softib's wire (framework/device/softib/softib_wire.h): packets between processes
 * over the shm rings and over UDP, the slot registry (reaping of dead owners,
 * a lock holder that dies), the doorbell of a sleeping receiver, and fault
 * injection. Every wait has a deadline; every child is reaped.
 */
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "harness.h"
extern "C" {
#include "log.h"
#include "sys.h"
}
#include "framework/device/softib/softib_wire.h"
#include "framework/device/softib/softib_registry.h"
extern "C" {
#include "framework/device/softib/softib_wire_priv.h"   /* a sender's mapping of a ring */
}

namespace {

/* One packet copied into buf (the wire hands it in place on the ring, until done) */
ssize_t wire_recv(softib_wire_t *wire, void *buf, axon_dev_gid_t *src)
{
    const uint8_t *pkt;
    ssize_t n = softib_wire_recv(wire, buf, &pkt, src);

    if ((n > 0) && (pkt != buf)) {
        memcpy(buf, pkt, (size_t)n);
    }
    softib_wire_recv_done(wire);
    return n;
}

/* A device of the suite's own (the conformance suites use softib0), and a port
 * base that puts its UDP ports (base + 7 * 4096 + slot at most) below the
 * ephemeral range. */
const unsigned kDev          = 6;
/* Device 7 is the slot-predicting test's alone: suites may run in parallel,
 * and another wire on its device could take the slot it expects. */
const unsigned kDevAlone     = 7;
/* Device 5 is the one test's that sends to a dead peer: the wire delivers to
 * a slot's current owner, so a process of another test taking the dead
 * peer's slot on a shared device would get those packets. */
const unsigned kDevDeadPeer  = 5;
const unsigned kPortBase     = 1000;
const double   kChildTimeout = 30.0;
const double   kWait         = 5.0;    /* one packet */

double now_sec()
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint32_t ipv4(const char *str)
{
    struct in_addr addr;

    inet_pton(AF_INET, str, &addr);
    return addr.s_addr;
}

softib_wire_params_t wire_params(softib_wire_mode_t mode, const char *addr = "127.0.0.1",
                                 unsigned dev = kDev)
{
    softib_wire_params_t params;

    memset(&params, 0, sizeof(params));
    params.dev_index     = dev;
    params.mode          = mode;
    params.ipv4_addr     = ipv4(addr);
    params.udp_port_base = kPortBase;
    return params;
}

unsigned udp_port(unsigned slot, unsigned dev = kDev)
{
    return kPortBase + dev * 4096 + slot;
}

/* ---------------------------------------------------------------- packets */

/* A test packet: sequence number, length, then pattern bytes seeded by the sequence. */
struct pkt_hdr {
    uint32_t seq;
    uint32_t len;
};

size_t pkt_make(uint8_t *buf, uint32_t seq, size_t len)
{
    pkt_hdr hdr = {seq, (uint32_t)len};

    memcpy(buf, &hdr, sizeof(hdr));
    axon_test_fill(buf + sizeof(hdr), len - sizeof(hdr), seq);
    return len;
}

/* Length of packet seq: sizes from 8 bytes to the largest the wire takes. */
size_t pkt_len(uint32_t seq)
{
    static const size_t sizes[] = {8, 64, 1000, 4096, SOFTIB_WIRE_MAX_PKT, 333};

    return sizes[seq % (sizeof(sizes) / sizeof(sizes[0]))];
}

/* True when buf holds an intact packet; its sequence number in *seq. */
bool pkt_check(const uint8_t *buf, ssize_t n, uint32_t *seq)
{
    pkt_hdr hdr;

    if (n < (ssize_t)sizeof(hdr)) {
        return false;
    }
    memcpy(&hdr, buf, sizeof(hdr));
    *seq = hdr.seq;
    return (hdr.len == (uint32_t)n) &&
           (axon_test_check(buf + sizeof(hdr), n - sizeof(hdr), hdr.seq) < 0);
}

/* Receive one packet within timeout seconds: its length, 0 on timeout, -errno. */
ssize_t recv_wait(softib_wire_t *wire, void *buf, axon_dev_gid_t *src, double timeout)
{
    double  deadline = now_sec() + timeout;
    ssize_t n;

    for (;;) {
        softib_wire_progress(wire, axon_sys_time_ns());
        n = wire_recv(wire, buf, src);
        if ((n != 0) || (now_sec() > deadline)) {
            return n;
        }
        usleep(50);
    }
}

/* Send, retrying while the destination ring is full; the last return value. */
int send_retry(softib_wire_t *wire, const axon_dev_gid_t *dgid, uint32_t qpn, const void *pkt,
               size_t len)
{
    double deadline = now_sec() + kWait;
    int    ret;

    while (((ret = softib_wire_send(wire, dgid, qpn, pkt, len)) == EAGAIN) &&
           (now_sec() < deadline)) {
        usleep(50);
    }
    return ret;
}

uint32_t qpn_of(unsigned slot)
{
    return SOFTIB_QPN_MAKE(slot, 1);
}

bool gid_equal(const axon_dev_gid_t &a, const axon_dev_gid_t &b)
{
    return memcmp(a.raw, b.raw, sizeof(a.raw)) == 0;
}

/* What two processes tell each other before exchanging packets. */
struct hello {
    uint32_t       slot;
    axon_dev_gid_t gid;
};

int hello_exchange(int fd, softib_wire_t *wire, hello *peer)
{
    hello  mine;
    void  *buf;
    size_t len;

    memset(&mine, 0, sizeof(mine));
    mine.slot = softib_wire_slot(wire);
    softib_wire_gid(wire, &mine.gid);
    if ((axon_test_send_blob(fd, &mine, sizeof(mine)) != 0) ||
        (axon_test_recv_blob(fd, &buf, &len) != 0)) {
        return -1;
    }
    if (len != sizeof(*peer)) {
        free(buf);
        return -1;
    }
    memcpy(peer, buf, sizeof(*peer));
    free(buf);
    return 0;
}

bool shm_exists(const std::string &name)
{
    struct stat st;

    return stat(("/dev/shm" + name).c_str(), &st) == 0;
}

/* ---------------------------------------------------------------- echo peer */

struct echo_args {
    softib_wire_mode_t       mode;
    const char              *addr;
    unsigned                 count;
    const axon_test_netns_t *netns;   /* if set, enter its side first */
    int                      side;
};

int enter_netns(const echo_args *args)
{
    return ((args->netns == NULL) || (axon_test_netns_enter(args->netns, args->side) == 0)) ? 0
                                                                                             : -1;
}

/* Child: open a wire, then send back every packet the parent sends, count of them. */
int echo_child(int fd, void *arg)
{
    const echo_args *args = (const echo_args*)arg;
    softib_wire_params_t params = wire_params(args->mode, args->addr);
    static uint8_t       buf[SOFTIB_WIRE_MAX_PKT];
    softib_wire_t       *wire;
    axon_dev_gid_t       src;
    hello                peer;
    uint32_t             seq;
    ssize_t              n;
    unsigned             i;
    int                  ret = 0;

    if (enter_netns(args) != 0) {
        return 9;
    }
    if (softib_wire_open(&params, &wire) != 0) {
        return 10;
    }
    if (hello_exchange(fd, wire, &peer) != 0) {
        ret = 11;
        goto out;
    }
    for (i = 0; i < args->count; ++i) {
        n = recv_wait(wire, buf, &src, kWait);
        if (!pkt_check(buf, n, &seq) || (seq != i)) {
            fprintf(stderr, "[echo peer] packet %u: %zd bytes%s (seq %u)\n", i, n,
                    (n > 0) ? ", not the one expected" : "", (n >= 8) ? seq : 0u);
            ret = 12;
            break;
        }
        if (!gid_equal(src, peer.gid)) {
            ret = 13;
            break;
        }
        if (send_retry(wire, &peer.gid, qpn_of(peer.slot), buf, n) != 0) {
            ret = 14;
            break;
        }
    }
    if (ret == 0) {
        axon_test_sync(fd);   /* the parent has the last echo before we close */
    }
out:
    softib_wire_close(wire);
    return ret;
}

/*
 * Open a wire and ping count packets of every size through the echo peer on
 * fd; 0, or a code saying what went wrong (runs in the test or in a child).
 */
int ping_run(int fd, const echo_args *args)
{
    softib_wire_params_t params = wire_params(args->mode, args->addr);
    static uint8_t       out[SOFTIB_WIRE_MAX_PKT], in[SOFTIB_WIRE_MAX_PKT];
    softib_wire_t       *wire;
    axon_dev_gid_t       src;
    hello                peer;
    uint32_t             seq, i;
    ssize_t              n;
    size_t               len;
    int                  ret = 0;

    if (softib_wire_open(&params, &wire) != 0) {
        return 20;
    }
    if ((hello_exchange(fd, wire, &peer) != 0) || (peer.slot == softib_wire_slot(wire))) {
        ret = 21;
        goto out;
    }
    for (i = 0; (i < args->count) && (ret == 0); ++i) {
        len = pkt_make(out, i, pkt_len(i));
        if (send_retry(wire, &peer.gid, qpn_of(peer.slot), out, len) != 0) {
            ret = 22;
        } else if ((n = recv_wait(wire, in, &src, kWait)) != (ssize_t)len) {
            fprintf(stderr, "echo of packet %u: %zd bytes, expected %zu\n", i, n, len);
            ret = 23;
        } else if (!pkt_check(in, n, &seq) || (seq != i) || !gid_equal(src, peer.gid)) {
            ret = 24;
        }
    }
    if (axon_test_sync(fd) != 0) {
        ret = (ret != 0) ? ret : 25;
    }
out:
    softib_wire_close(wire);
    return ret;
}

int ping_child(int fd, void *arg)
{
    const echo_args *args = (const echo_args*)arg;

    return (enter_netns(args) == 0) ? ping_run(fd, args) : 9;
}

const unsigned kPings = 300;

/* The test pings an echo child. */
void ping_pong(softib_wire_mode_t child_mode, const char *child_addr,
               softib_wire_mode_t my_mode, const char *my_addr)
{
    echo_args        child_args = {child_mode, child_addr, kPings, NULL, 0};
    echo_args        my_args    = {my_mode, my_addr, kPings, NULL, 0};
    axon_test_peer_t child;

    ASSERT_EQ(0, axon_test_peer_spawn(&child, echo_child, &child_args, kChildTimeout));
    EXPECT_EQ(0, ping_run(child.fd, &my_args));
    EXPECT_EQ(0, axon_test_peer_wait(&child, kChildTimeout));
}

} // namespace

/* ---------------------------------------------------------------- basics */

TEST(SoftibWire, OpenGivesSlotAndMappedGid)
{
    softib_wire_params_t params = wire_params(SOFTIB_WIRE_AUTO, "127.0.0.2");
    softib_wire_t       *a, *b;
    axon_dev_gid_t       gid;
    static const uint8_t expect[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 2};

    ASSERT_EQ(0, softib_wire_open(&params, &a));
    ASSERT_EQ(0, softib_wire_open(&params, &b));
    EXPECT_GE(softib_wire_slot(a), 1u);
    EXPECT_LE(softib_wire_slot(a), 4094u);
    EXPECT_NE(softib_wire_slot(a), softib_wire_slot(b));
    softib_wire_gid(a, &gid);
    EXPECT_EQ(0, memcmp(gid.raw, expect, 16));
    EXPECT_GE(softib_wire_fd(a), 0);
    EXPECT_EQ(0u, softib_wire_next_due_ns(a));
    softib_wire_close(b);
    softib_wire_close(a);
}

TEST(SoftibWire, CloseFreesSlotAndSegments)
{
    softib_wire_params_t params = wire_params(SOFTIB_WIRE_SHM);
    softib_registry_t   *reg;
    softib_wire_t       *wire;
    char                 ring[SOFTIB_REGISTRY_NAME_LEN];
    uint64_t             gen;
    unsigned             slot;

    ASSERT_EQ(0, softib_wire_open(&params, &wire));
    slot = softib_wire_slot(wire);
    ASSERT_EQ(0, softib_registry_open(kDev, &reg));
    ASSERT_EQ(0, softib_registry_lookup(reg, slot, &gen, ring, sizeof(ring), NULL));
    EXPECT_EQ(1u, gen & 1);
    EXPECT_TRUE(shm_exists(ring)) << ring;
    EXPECT_TRUE(shm_exists(std::string(ring) + ".bell"));
    softib_wire_close(wire);
    EXPECT_EQ(ENOENT, softib_registry_lookup(reg, slot, &gen, NULL, 0, NULL));
    EXPECT_FALSE(shm_exists(ring));
    EXPECT_FALSE(shm_exists(std::string(ring) + ".bell"));
    softib_registry_close(reg);
}

TEST(SoftibWire, BadParamsRefused)
{
    softib_wire_params_t params = wire_params(SOFTIB_WIRE_AUTO);
    softib_wire_t       *wire   = NULL;

    params.mode = (softib_wire_mode_t)7;
    EXPECT_EQ(EINVAL, softib_wire_open(&params, &wire));
    params      = wire_params(SOFTIB_WIRE_AUTO);
    params.loss = 1.5;
    EXPECT_EQ(EINVAL, softib_wire_open(&params, &wire));
    params      = wire_params(SOFTIB_WIRE_AUTO);
    params.dup  = -0.1;
    EXPECT_EQ(EINVAL, softib_wire_open(&params, &wire));
    params         = wire_params(SOFTIB_WIRE_AUTO);
    params.reorder = NAN;
    EXPECT_EQ(EINVAL, softib_wire_open(&params, &wire));
    params               = wire_params(SOFTIB_WIRE_AUTO);
    params.udp_port_base = 70000;
    EXPECT_EQ(EINVAL, softib_wire_open(&params, &wire));
    EXPECT_EQ(EINVAL, softib_wire_open(NULL, &wire));
    EXPECT_TRUE(wire == NULL);
}

TEST(SoftibWire, BadSendsRefused)
{
    softib_wire_params_t params = wire_params(SOFTIB_WIRE_AUTO);
    static uint8_t       pkt[SOFTIB_WIRE_MAX_PKT + 1];
    softib_wire_t       *wire;
    axon_dev_gid_t       gid, v6;
    unsigned             slot;

    ASSERT_EQ(0, softib_wire_open(&params, &wire));
    softib_wire_gid(wire, &gid);
    slot = softib_wire_slot(wire);
    EXPECT_EQ(EINVAL, softib_wire_send(wire, &gid, qpn_of(slot), pkt, SOFTIB_WIRE_MAX_PKT + 1));
    EXPECT_EQ(EINVAL, softib_wire_send(wire, &gid, qpn_of(slot), pkt, 0));
    EXPECT_EQ(EINVAL, softib_wire_send(wire, &gid, SOFTIB_QPN_MAKE(0, 1), pkt, 8));
    EXPECT_EQ(EINVAL, softib_wire_send(wire, &gid, 0xffffff, pkt, 8));   /* slot 4095 */
    memset(&v6, 0, sizeof(v6));
    v6.raw[0] = 0xfe;
    v6.raw[1] = 0x80;
    v6.raw[15] = 1;
    EXPECT_EQ(EINVAL, softib_wire_send(wire, &v6, qpn_of(slot), pkt, 8));
    /* The largest packet goes, and comes back whole. */
    pkt_make(pkt, 7, SOFTIB_WIRE_MAX_PKT);
    EXPECT_EQ(0, softib_wire_send(wire, &gid, qpn_of(slot), pkt, SOFTIB_WIRE_MAX_PKT));
    static uint8_t in[SOFTIB_WIRE_MAX_PKT];
    axon_dev_gid_t src;
    uint32_t       seq;
    ssize_t        n = recv_wait(wire, in, &src, kWait);
    EXPECT_EQ((ssize_t)SOFTIB_WIRE_MAX_PKT, n);
    EXPECT_TRUE(pkt_check(in, n, &seq));
    softib_wire_close(wire);
}

TEST(SoftibWire, SendToFreeSlotIsDropped)
{
    softib_wire_params_t params = wire_params(SOFTIB_WIRE_SHM);
    softib_wire_t       *wire;
    axon_dev_gid_t       gid;
    uint8_t              pkt[16] = {0};

    ASSERT_EQ(0, softib_wire_open(&params, &wire));
    softib_wire_gid(wire, &gid);
    EXPECT_EQ(0, softib_wire_send(wire, &gid, qpn_of(4000), pkt, sizeof(pkt)));
    softib_wire_close(wire);
}

/* ---------------------------------------------------------------- two processes */

TEST(SoftibWireXproc, ShmPingPongBetweenProcesses)
{
    ping_pong(SOFTIB_WIRE_SHM, "127.0.0.1", SOFTIB_WIRE_SHM, "127.0.0.1");
}

TEST(SoftibWireXproc, AutoSameGidTakesShm)
{
    /* The child has no UDP socket (shm mode): packets reach it only through its ring. */
    ping_pong(SOFTIB_WIRE_SHM, "127.0.0.1", SOFTIB_WIRE_AUTO, "127.0.0.1");
}

TEST(SoftibWireXproc, UdpPingPongOnLoopback)
{
    ping_pong(SOFTIB_WIRE_UDP, "127.0.0.1", SOFTIB_WIRE_UDP, "127.0.0.1");
}

TEST(SoftibWireXproc, AutoDistinctAddressesTakeUdp)
{
    ping_pong(SOFTIB_WIRE_AUTO, "127.0.0.3", SOFTIB_WIRE_AUTO, "127.0.0.2");
}

/* ---------------------------------------------------------------- ring */

TEST(SoftibWire, RingFullThenDrains)
{
    softib_wire_params_t params = wire_params(SOFTIB_WIRE_SHM);
    static uint8_t       pkt[SOFTIB_WIRE_MAX_PKT];
    softib_wire_t       *tx, *rx;
    axon_dev_gid_t       gid, src;
    uint32_t             seq, sent = 0, i;
    ssize_t              n;
    int                  ret;

    ASSERT_EQ(0, softib_wire_open(&params, &tx));
    ASSERT_EQ(0, softib_wire_open(&params, &rx));
    softib_wire_gid(rx, &gid);
    for (;;) {
        pkt_make(pkt, sent, 100);
        ret = softib_wire_send(tx, &gid, qpn_of(softib_wire_slot(rx)), pkt, 100);
        if (ret != 0) {
            break;
        }
        ASSERT_LT(++sent, 100000u);
    }
    EXPECT_EQ(EAGAIN, ret);
    EXPECT_GE(sent, 16u);
    EXPECT_EQ(EAGAIN, softib_wire_send(tx, &gid, qpn_of(softib_wire_slot(rx)), pkt, 100));
    for (i = 0; i < sent; ++i) {
        n = wire_recv(rx, pkt, &src);
        ASSERT_TRUE(pkt_check(pkt, n, &seq)) << i;
        ASSERT_EQ(i, seq);
    }
    EXPECT_EQ(0, wire_recv(rx, pkt, &src));
    pkt_make(pkt, 1, 100);
    EXPECT_EQ(0, softib_wire_send(tx, &gid, qpn_of(softib_wire_slot(rx)), pkt, 100));
    EXPECT_EQ(100, wire_recv(rx, pkt, &src));
    softib_wire_close(rx);
    softib_wire_close(tx);
}

namespace {

/* Child: open a wire, tell the parent its slot, and wait to be killed. */
int idle_child(int fd, void *arg)
{
    softib_wire_params_t params = wire_params(SOFTIB_WIRE_AUTO);
    softib_wire_t       *wire;
    unsigned             slot;
    char                 c;

    if (softib_wire_open(&params, &wire) != 0) {
        return 10;
    }
    slot = softib_wire_slot(wire);
    axon_test_send_blob(fd, &slot, sizeof(slot));
    while (read(fd, &c, 1) > 0) {
    }
    softib_wire_close(wire);
    return 0;
}

unsigned recv_slot(int fd)
{
    void    *buf;
    size_t   len;
    unsigned slot = 0;

    if (axon_test_recv_blob(fd, &buf, &len) == 0) {
        if (len == sizeof(slot)) {
            memcpy(&slot, buf, sizeof(slot));
        }
        free(buf);
    }
    return slot;
}

/* Wait until pid is a zombie (killed, not yet reaped). */
bool wait_zombie(pid_t pid)
{
    char   path[64], buf[256];
    double deadline = now_sec() + kWait;
    char  *p;
    int    fd;
    ssize_t n;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    while (now_sec() < deadline) {
        fd = open(path, O_RDONLY);
        if (fd >= 0) {
            n = read(fd, buf, sizeof(buf) - 1);
            close(fd);
            if (n > 0) {
                buf[n] = '\0';
                p = strrchr(buf, ')');
                if ((p != NULL) && (p[1] == ' ') && (p[2] == 'Z')) {
                    return true;
                }
            }
        }
        usleep(1000);
    }
    return false;
}

void reap_and_reuse(bool leave_zombie)
{
    softib_wire_params_t params = wire_params(SOFTIB_WIRE_AUTO);
    softib_registry_t   *reg;
    axon_test_peer_t     child;
    softib_wire_t       *wire;
    char                 ring[SOFTIB_REGISTRY_NAME_LEN];
    uint64_t             gen;
    unsigned             slot;
    pid_t                pid;

    ASSERT_EQ(0, axon_test_peer_spawn(&child, idle_child, NULL, kChildTimeout));
    slot = recv_slot(child.fd);
    ASSERT_NE(0u, slot);
    ASSERT_EQ(0, softib_registry_open(kDev, &reg));
    ASSERT_EQ(0, softib_registry_lookup(reg, slot, &gen, ring, sizeof(ring), NULL));
    EXPECT_TRUE(shm_exists(ring));

    if (leave_zombie) {
        pid = child.pid;
        kill(pid, SIGKILL);
        EXPECT_TRUE(wait_zombie(pid));
    } else {
        pid = axon_test_peer_crash(&child);
        ASSERT_GT(pid, 0);
    }
    /* Still registered and its ring still there: nobody has looked yet, unless
     * another test's process on this device (tests run two at a time) opened a
     * wire meanwhile and reaped it. A reaper unlinks the ring, then moves the
     * generation on: a ring gone under an unchanged generation must be such a
     * reaper at work, which finishes within moments. */
    if (!shm_exists(ring) || (softib_registry_gen(reg, slot) != gen)) {
        for (int i = 0; (i < 1000) && (softib_registry_gen(reg, slot) == gen); ++i) {
            usleep(1000);
        }
        EXPECT_NE(gen, softib_registry_gen(reg, slot)) << "ring gone, slot still registered";
    }

    /* Opening reaps it. Another process on this device may take free slots
     * meanwhile, so open until one of ours lands on the dead child's slot, or
     * another test's process holds it (then it came back to that one). */
    std::vector<softib_wire_t*> wires;
    bool                        reused = false;

    while (!reused && (wires.size() < 16)) {
        ASSERT_EQ(0, softib_wire_open(&params, &wire));
        wires.push_back(wire);
        /* Reaped (gen + 1), then taken (gen + 2): by us, or by someone else. */
        reused = (softib_wire_slot(wire) == slot) || (softib_registry_gen(reg, slot) >= gen + 2);
        if (wires.size() == 1) {
            EXPECT_NE(gen, softib_registry_gen(reg, slot));   /* reaped by the first open */
            EXPECT_FALSE(shm_exists(ring));                   /* with the dead owner's ring */
            EXPECT_FALSE(shm_exists(std::string(ring) + ".bell"));
        }
    }
    EXPECT_TRUE(reused) << "slot " << slot << " never came back";
    EXPECT_GT(softib_registry_gen(reg, slot), gen);            /* under a new generation */
    for (softib_wire_t *w : wires) {
        softib_wire_close(w);
    }
    softib_registry_close(reg);
    axon_test_peer_kill(&child);
}

/* Child: take the registry's lock and wait to be killed holding it. */
int lock_child(int fd, void *arg)
{
    softib_registry_t *reg;
    char               c = 1;

    if ((softib_registry_open(kDev, &reg) != 0) || (softib_registry_lock(reg) != 0)) {
        return 10;
    }
    axon_test_send_blob(fd, &c, 1);
    while (read(fd, &c, 1) > 0) {
    }
    return 0;
}

} // namespace

TEST(SoftibWireXproc, SlotOfKilledProcessReapedAndReused)
{
    reap_and_reuse(false);
}

TEST(SoftibWireXproc, SlotOfZombieReapedAndReused)
{
    reap_and_reuse(true);
}

TEST(SoftibWireXproc, RegistryLockOfKilledHolderRecovered)
{
    softib_wire_params_t params = wire_params(SOFTIB_WIRE_SHM);
    axon_test_peer_t     child;
    softib_wire_t       *wire;
    void                *buf;
    size_t               len;

    ASSERT_EQ(0, axon_test_peer_spawn(&child, lock_child, NULL, kChildTimeout));
    ASSERT_EQ(0, axon_test_recv_blob(child.fd, &buf, &len));
    free(buf);
    ASSERT_GT(axon_test_peer_crash(&child), 0);
    alarm(20);   /* a lock never recovered would hang the open */
    EXPECT_EQ(0, softib_wire_open(&params, &wire));
    alarm(0);
    softib_wire_close(wire);
}

namespace {

/* Child: die inside softib_wire_send, between claiming a cell and publishing it. */
/*
 * A child that must die by its fault, without a core: the default action,
 * not softib's guard (softib_guard.h), which an earlier test of this process
 * may have installed by registering memory, nor ASan's report.
 */
void die_by_fault()
{
    struct rlimit no_core = {0, 0};

    setrlimit(RLIMIT_CORE, &no_core);
    signal(SIGSEGV, SIG_DFL);
}

int crash_in_send_child(int fd, void *arg)
{
    softib_wire_params_t params = wire_params(SOFTIB_WIRE_SHM);
    softib_wire_t       *wire;
    hello                peer;
    long                 page = sysconf(_SC_PAGESIZE);
    uint8_t             *mem;

    die_by_fault();
    if (softib_wire_open(&params, &wire) != 0) {
        return 10;
    }
    if (hello_exchange(fd, wire, &peer) != 0) {
        return 11;
    }
    /* A packet whose tail lies in an unreadable page: the copy into the cell faults. */
    mem = (uint8_t*)mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                         -1, 0);
    if ((mem == MAP_FAILED) || (mprotect(mem + page, page, PROT_NONE) != 0)) {
        return 12;
    }
    softib_wire_send(wire, &peer.gid, qpn_of(peer.slot), mem + page - 100, 1000);
    return 13;   /* not reached */
}

/* Counts log messages that contain a needle (the hook sees them before filtering). */
struct log_counter {
    const char *needle;
    unsigned    count;
};

void log_count_hook(axon_log_level_t level, const char *message, void *arg)
{
    log_counter *counter = (log_counter*)arg;

    if (strstr(message, counter->needle) != NULL) {
        ++counter->count;
    }
}

/* Open and close a wire: reaps what dead children of a test left in the registry. */
void reap_leftovers(unsigned dev = kDev)
{
    softib_wire_params_t params = wire_params(SOFTIB_WIRE_SHM, "127.0.0.1", dev);
    softib_wire_t       *wire;

    if (softib_wire_open(&params, &wire) == 0) {
        softib_wire_close(wire);
    }
}

} // namespace

TEST(SoftibWireXproc, CellOfProducerKilledMidCopySkipped)
{
    log_counter          skipped = {"skipping a cell claimed", 0};
    softib_wire_params_t params = wire_params(SOFTIB_WIRE_SHM);
    static uint8_t       pkt[256];
    axon_test_peer_t     child;
    softib_wire_t       *rx, *tx;
    axon_dev_gid_t       gid, src;
    hello                peer;
    uint32_t             seq;
    ssize_t              n;
    int                  i;

    ASSERT_EQ(0, softib_wire_open(&params, &rx));
    ASSERT_EQ(0, softib_wire_open(&params, &tx));
    ASSERT_EQ(0, axon_test_peer_spawn(&child, crash_in_send_child, NULL, kChildTimeout));
    ASSERT_EQ(0, hello_exchange(child.fd, rx, &peer));
    EXPECT_EQ(-1, axon_test_peer_wait(&child, kChildTimeout));   /* died by SIGSEGV */

    /* The head cell stays claimed by the dead child; what follows it still arrives. */
    softib_wire_gid(rx, &gid);
    for (i = 0; i < 3; ++i) {
        pkt_make(pkt, i, 100);
        ASSERT_EQ(0, softib_wire_send(tx, &gid, qpn_of(softib_wire_slot(rx)), pkt, 100));
    }
    EXPECT_NE(0, softib_wire_arm(rx));
    softib_wire_disarm(rx);
    axon_log_set_hook(log_count_hook, &skipped);
    for (i = 0; i < 3; ++i) {
        n = recv_wait(rx, pkt, &src, kWait);
        EXPECT_TRUE(pkt_check(pkt, n, &seq) && (seq == (uint32_t)i)) << i;
    }
    axon_log_set_hook(NULL, NULL);
    EXPECT_EQ(1u, skipped.count);
    softib_wire_close(tx);
    softib_wire_close(rx);
    reap_leftovers();
}

namespace {

/*
 * Child: die between claiming a cell of the parent's ring and moving the
 * ring's tail past it. Its mapping of the page holding the tail turns
 * read-only after a few packets: the next send claims a cell further on,
 * then faults moving the tail.
 */
int crash_before_tail_child(int fd, void *arg)
{
    softib_wire_params_t params = wire_params(SOFTIB_WIRE_SHM);
    unsigned             count = *(const unsigned*)arg;
    static uint8_t       pkt[256];
    softib_wire_t       *wire;
    hello                peer;
    unsigned             i;

    die_by_fault();
    if (softib_wire_open(&params, &wire) != 0) {
        return 10;
    }
    if (hello_exchange(fd, wire, &peer) != 0) {
        return 11;
    }
    for (i = 0; i < count; ++i) {
        pkt_make(pkt, i, 100);
        if (softib_wire_send(wire, &peer.gid, qpn_of(peer.slot), pkt, 100) != 0) {
            return 12;
        }
    }
    if (mprotect(wire->peers[peer.slot].ring, sysconf(_SC_PAGESIZE), PROT_READ) != 0) {
        return 13;
    }
    pkt_make(pkt, count, 100);
    softib_wire_send(wire, &peer.gid, qpn_of(peer.slot), pkt, 100);
    return 14;   /* not reached */
}

} // namespace

/*
 * A producer died after claiming the cell at the tail and before moving the
 * tail; the receiver skipped the cell. Other producers must take the tail
 * past it (they used to spin on it forever, device lock held).
 */
TEST(SoftibWireXproc, TailLeftByProducerKilledBeforeMovingItIsMoved)
{
    log_counter          skipped = {"skipping a cell claimed", 0};
    softib_wire_params_t params = wire_params(SOFTIB_WIRE_SHM);
    /* Packets before the crash: the claimed cell lies past the tail's page. */
    unsigned             before = (unsigned)(sysconf(_SC_PAGESIZE) / SOFTIB_WIRE_MAX_PKT) + 1;
    echo_args            echo_params = {SOFTIB_WIRE_SHM, "127.0.0.1", 3, NULL, 0};
    static uint8_t       pkt[SOFTIB_WIRE_MAX_PKT];
    axon_test_peer_t     child, echo;
    softib_wire_t       *rx;
    axon_dev_gid_t       src;
    hello                peer;
    uint32_t             seq;
    ssize_t              n;
    unsigned             i;

    ASSERT_EQ(0, softib_wire_open(&params, &rx));
    ASSERT_EQ(0, axon_test_peer_spawn(&child, crash_before_tail_child, &before, kChildTimeout));
    ASSERT_EQ(0, hello_exchange(child.fd, rx, &peer));
    EXPECT_EQ(-1, axon_test_peer_wait(&child, kChildTimeout));   /* died by SIGSEGV */
    for (i = 0; i < before; ++i) {
        n = recv_wait(rx, pkt, &src, kWait);
        ASSERT_TRUE(pkt_check(pkt, n, &seq) && (seq == i)) << i;
    }
    /* The dead child's cell: skipped, and nothing else there. */
    axon_log_set_hook(log_count_hook, &skipped);
    EXPECT_EQ(0, recv_wait(rx, pkt, &src, 0.2));
    axon_log_set_hook(NULL, NULL);
    ASSERT_EQ(1u, skipped.count) << "the child did not die holding a claimed cell";

    /* A live producer's packets (echoes of ours) arrive behind it. */
    ASSERT_EQ(0, axon_test_peer_spawn(&echo, echo_child, &echo_params, kChildTimeout));
    ASSERT_EQ(0, hello_exchange(echo.fd, rx, &peer));
    for (i = 0; i < echo_params.count; ++i) {
        size_t len = pkt_make(pkt, i, 100);
        ASSERT_EQ(0, send_retry(rx, &peer.gid, qpn_of(peer.slot), pkt, len));
        n = recv_wait(rx, pkt, &src, kWait);
        if (!pkt_check(pkt, n, &seq) || (seq != i)) {
            /* The echo peer's exit code, or (stuck) its stacks. */
            ADD_FAILURE() << "echo " << i << " never came (" << n << " bytes): the producer is "
                          << "stuck on the tail, or the echo peer failed (exit "
                          << axon_test_peer_wait(&echo, kWait) << ")";
            break;
        }
    }
    if (i == echo_params.count) {
        EXPECT_EQ(0, axon_test_sync(echo.fd));
        EXPECT_EQ(0, axon_test_peer_wait(&echo, kChildTimeout));
    }
    axon_test_peer_kill(&echo);
    softib_wire_close(rx);
    reap_leftovers();
}

namespace {

/* Child: open a wire on device *arg, exchange hellos, then wait to be killed. */
int hello_idle_child(int fd, void *arg)
{
    softib_wire_params_t params = wire_params(SOFTIB_WIRE_SHM, "127.0.0.1",
                                              *(const unsigned*)arg);
    softib_wire_t       *wire;
    hello                peer;
    char                 c;

    if ((softib_wire_open(&params, &wire) != 0) || (hello_exchange(fd, wire, &peer) != 0)) {
        return 10;
    }
    while (read(fd, &c, 1) > 0) {
    }
    return 0;
}

/* Child: close the wire the test opened before forking. */
int close_inherited_child(int fd, void *arg)
{
    softib_wire_close((softib_wire_t*)arg);
    return 0;
}

/*
 * A child with a wire of its own and ours beside it, hellos exchanged, on
 * a device of their own: until a sender sees an owner gone, its packets go
 * to whoever holds the slot (see kDevDeadPeer).
 */
void wire_beside_idle_child(axon_test_peer_t *child, softib_wire_t **wire_p, hello *peer)
{
    softib_wire_params_t params = wire_params(SOFTIB_WIRE_SHM, "127.0.0.1", kDevDeadPeer);
    unsigned             dev    = kDevDeadPeer;

    ASSERT_EQ(0, axon_test_peer_spawn(child, hello_idle_child, &dev, kChildTimeout));
    ASSERT_EQ(0, softib_wire_open(&params, wire_p));
    ASSERT_EQ(0, hello_exchange(child->fd, *wire_p, peer));
}

} // namespace

TEST(SoftibWireXproc, FullRingOfDeadOwnerDrops)
{
    uint8_t          pkt[64] = {0};
    axon_test_peer_t child;
    softib_wire_t   *wire;
    hello            peer;
    double           deadline;
    unsigned         sent = 0;
    int              ret;

    wire_beside_idle_child(&child, &wire, &peer);
    ASSERT_FALSE(HasFatalFailure());
    while ((ret = softib_wire_send(wire, &peer.gid, qpn_of(peer.slot), pkt, 64)) == 0) {
        ASSERT_LT(++sent, 100000u);
    }
    ASSERT_EQ(EAGAIN, ret);   /* full, the owner alive */
    ASSERT_GT(axon_test_peer_crash(&child), 0);
    /* Within a fraction of a second the sender sees the owner is gone and drops. */
    deadline = now_sec() + kWait;
    while (((ret = softib_wire_send(wire, &peer.gid, qpn_of(peer.slot), pkt, 64)) == EAGAIN) &&
           (now_sec() < deadline)) {
        usleep(1000);
    }
    EXPECT_EQ(0, ret);
    softib_wire_close(wire);
    reap_leftovers(kDevDeadPeer);
}

TEST(SoftibWireXproc, RingOfDeadOwnerUnmappedBySweep)
{
    /* The sweep looks only as far as the highest slot this wire ever mapped
     * (its peer table is not walked whole): a dead owner's ring there goes. */
    uint8_t          pkt[64] = {0};
    axon_test_peer_t child;
    softib_wire_t   *wire;
    hello            peer;
    uint64_t         now;

    wire_beside_idle_child(&child, &wire, &peer);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_EQ(0, softib_wire_send(wire, &peer.gid, qpn_of(peer.slot), pkt, 64));
    ASSERT_NE(nullptr, wire->peers[peer.slot].ring);
    now = axon_sys_time_ns();
    softib_wire_progress(wire, now + 2 * SOFTIB_WIRE_SWEEP_NS);
    EXPECT_NE(nullptr, wire->peers[peer.slot].ring) << "the owner lives: its ring stays";
    ASSERT_GT(axon_test_peer_crash(&child), 0);
    softib_wire_progress(wire, now + 4 * SOFTIB_WIRE_SWEEP_NS);
    EXPECT_EQ(nullptr, wire->peers[peer.slot].ring) << "slot " << peer.slot;
    EXPECT_EQ(-1, wire->peers[peer.slot].bell_fd);
    softib_wire_close(wire);
    reap_leftovers(kDevDeadPeer);
}

TEST(SoftibWireXproc, ForkedChildCloseKeepsParentSlot)
{
    softib_wire_params_t params = wire_params(SOFTIB_WIRE_AUTO);
    softib_registry_t   *reg;
    axon_test_peer_t     child;
    softib_wire_t       *wire;
    axon_dev_gid_t       gid, src;
    char                 ring[SOFTIB_REGISTRY_NAME_LEN];
    uint8_t              pkt[64] = {0};
    uint64_t             gen;

    ASSERT_EQ(0, softib_wire_open(&params, &wire));
    ASSERT_EQ(0, softib_registry_open(kDev, &reg));
    ASSERT_EQ(0, softib_registry_lookup(reg, softib_wire_slot(wire), &gen, ring, sizeof(ring),
                                        NULL));
    ASSERT_EQ(0, axon_test_peer_spawn(&child, close_inherited_child, wire, kChildTimeout));
    EXPECT_EQ(0, axon_test_peer_wait(&child, kChildTimeout));
    EXPECT_EQ(gen, softib_registry_gen(reg, softib_wire_slot(wire)));
    EXPECT_TRUE(shm_exists(ring));
    softib_wire_gid(wire, &gid);
    EXPECT_EQ(0, softib_wire_send(wire, &gid, qpn_of(softib_wire_slot(wire)), pkt, 64));
    EXPECT_EQ(64, wire_recv(wire, pkt, &src));
    softib_registry_close(reg);
    softib_wire_close(wire);
}

/* ---------------------------------------------------------------- UDP port */

TEST(SoftibWire, UdpPortTakenFailsOpen)
{
    softib_wire_params_t params = wire_params(SOFTIB_WIRE_UDP, "127.0.0.1", kDevAlone);
    struct sockaddr_in   sin;
    softib_wire_t       *wire;
    unsigned             slot;
    int                  fd;

    /* Learn which slot comes next: the one a closed wire gives back. */
    ASSERT_EQ(0, softib_wire_open(&params, &wire));
    slot = softib_wire_slot(wire);
    softib_wire_close(wire);

    fd = socket(AF_INET, SOCK_DGRAM, 0);
    ASSERT_GE(fd, 0);
    memset(&sin, 0, sizeof(sin));
    sin.sin_family      = AF_INET;
    sin.sin_port        = htons(udp_port(slot, kDevAlone));
    sin.sin_addr.s_addr = ipv4("127.0.0.1");
    ASSERT_EQ(0, bind(fd, (struct sockaddr*)&sin, sizeof(sin)));
    EXPECT_EQ(EADDRINUSE, softib_wire_open(&params, &wire));
    close(fd);
    /* Nothing was left taken: the same slot opens now. */
    ASSERT_EQ(0, softib_wire_open(&params, &wire));
    EXPECT_EQ(slot, softib_wire_slot(wire));
    softib_wire_close(wire);
}

/* ---------------------------------------------------------------- doorbell */

namespace {

struct sleeper_args {
    softib_wire_mode_t       mode;
    unsigned                 rounds;
    const axon_test_netns_t *netns;   /* if set, sleep in its side 0 */
};

/*
 * Child: sleep in poll() on the wire's fd until a packet comes, rounds times;
 * tell the parent after each. Fails if poll times out (no wake-up).
 */
int sleeper_child(int fd, void *arg)
{
    const sleeper_args  *args   = (const sleeper_args*)arg;
    softib_wire_params_t params = wire_params(args->mode);
    static uint8_t       buf[SOFTIB_WIRE_MAX_PKT];
    softib_wire_t       *wire;
    axon_dev_gid_t       src;
    struct pollfd        pfd;
    hello                peer;
    unsigned             round, slept = 0;
    uint32_t             seq;
    ssize_t              n;
    int                  ret = 0;

    if ((args->netns != NULL) && (axon_test_netns_enter(args->netns, 0) != 0)) {
        return 9;
    }
    if (softib_wire_open(&params, &wire) != 0) {
        return 10;
    }
    if (hello_exchange(fd, wire, &peer) != 0) {
        return 11;
    }
    for (round = 0; (round < args->rounds) && (ret == 0); ++round) {
        for (;;) {
            n = wire_recv(wire, buf, &src);
            if (n != 0) {
                break;
            }
            if (softib_wire_arm(wire) == 0) {
                pfd.fd     = softib_wire_fd(wire);
                pfd.events = POLLIN;
                if (poll(&pfd, 1, 10000) <= 0) {
                    ret = 12;   /* not woken */
                    break;
                }
                ++slept;
            }
            softib_wire_disarm(wire);
        }
        if ((ret == 0) && (!pkt_check(buf, n, &seq) || (seq != round))) {
            ret = 13;
        }
        if (axon_test_send_blob(fd, &round, sizeof(round)) != 0) {
            ret = 14;
        }
    }
    if ((ret == 0) && (slept < args->rounds)) {
        ret = 15;   /* never slept: the test proved nothing */
    }
    softib_wire_close(wire);
    return ret;
}

void doorbell_wakes(softib_wire_mode_t mode, const axon_test_netns_t *netns = NULL)
{
    sleeper_args         args   = {mode, 5, netns};
    softib_wire_params_t params = wire_params(mode);
    uint8_t              pkt[64];
    axon_test_peer_t     child;
    softib_wire_t       *wire;
    hello                peer;
    unsigned             round;
    void                *buf;
    size_t               len;

    ASSERT_EQ(0, axon_test_peer_spawn(&child, sleeper_child, &args, kChildTimeout));
    ASSERT_EQ(0, softib_wire_open(&params, &wire));
    ASSERT_EQ(0, hello_exchange(child.fd, wire, &peer));
    for (round = 0; round < args.rounds; ++round) {
        usleep(50000);   /* let the child fall asleep */
        pkt_make(pkt, round, sizeof(pkt));
        ASSERT_EQ(0, softib_wire_send(wire, &peer.gid, qpn_of(peer.slot), pkt, sizeof(pkt)));
        ASSERT_EQ(0, axon_test_recv_blob(child.fd, &buf, &len)) << "round " << round;
        free(buf);
    }
    EXPECT_EQ(0, axon_test_peer_wait(&child, kChildTimeout));
    softib_wire_close(wire);
}

} // namespace

TEST(SoftibWireXproc, ShmDoorbellWakesPollingReceiver)
{
    doorbell_wakes(SOFTIB_WIRE_SHM);
}

TEST(SoftibWireXproc, UdpWakesPollingReceiver)
{
    doorbell_wakes(SOFTIB_WIRE_UDP);
}

TEST(SoftibWire, ArmSaysWhenPacketsWait)
{
    softib_wire_params_t params = wire_params(SOFTIB_WIRE_SHM);
    uint8_t              pkt[64];
    softib_wire_t       *tx, *rx;
    axon_dev_gid_t       gid, src;
    struct pollfd        pfd;

    ASSERT_EQ(0, softib_wire_open(&params, &tx));
    ASSERT_EQ(0, softib_wire_open(&params, &rx));
    softib_wire_gid(rx, &gid);
    pfd.fd     = softib_wire_fd(rx);
    pfd.events = POLLIN;

    EXPECT_EQ(0, softib_wire_arm(rx));
    EXPECT_EQ(0, poll(&pfd, 1, 0));
    pkt_make(pkt, 0, sizeof(pkt));
    ASSERT_EQ(0, softib_wire_send(tx, &gid, qpn_of(softib_wire_slot(rx)), pkt, sizeof(pkt)));
    EXPECT_EQ(1, poll(&pfd, 1, 1000));   /* armed: the send rang */
    softib_wire_disarm(rx);
    EXPECT_EQ(0, poll(&pfd, 1, 0));      /* drained */
    EXPECT_NE(0, softib_wire_arm(rx));   /* but the packet waits: do not sleep */
    softib_wire_disarm(rx);
    EXPECT_EQ((ssize_t)sizeof(pkt), wire_recv(rx, pkt, &src));

    /* Not armed: a send does not ring. */
    ASSERT_EQ(0, softib_wire_send(tx, &gid, qpn_of(softib_wire_slot(rx)), pkt, sizeof(pkt)));
    EXPECT_EQ(0, poll(&pfd, 1, 0));
    EXPECT_EQ((ssize_t)sizeof(pkt), wire_recv(rx, pkt, &src));
    softib_wire_close(rx);
    softib_wire_close(tx);
}

/* ---------------------------------------------------------------- namespaces */

namespace {

/* Two network namespaces for the test's scope; false (test skipped) when we may not. */
struct netns_guard {
    axon_test_netns_t ns;
    int               ret;

    netns_guard() : ns(), ret(axon_test_netns_create(&ns)) {}
    ~netns_guard() { axon_test_netns_destroy(&ns); }
};

/*
 * Join two children that cannot reach each other but through the test: copy
 * bytes both ways until both have closed. 0, or -1 on timeout or error.
 */
int relay(int fd_a, int fd_b, double timeout)
{
    struct pollfd pfd[2];
    double        deadline = now_sec() + timeout;
    char          buf[4096];
    int           open_fds = 2, i, fds[2] = {fd_a, fd_b};
    ssize_t       n;

    while (open_fds > 0) {
        for (i = 0; i < 2; ++i) {
            pfd[i].fd     = fds[i];
            pfd[i].events = POLLIN;
        }
        if ((now_sec() > deadline) || (poll(pfd, 2, 100) < 0)) {
            return -1;
        }
        for (i = 0; i < 2; ++i) {
            if ((fds[i] < 0) || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) {
                continue;
            }
            n = read(fds[i], buf, sizeof(buf));
            if (n <= 0) {
                fds[i] = -1;   /* poll ignores negative fds */
                --open_fds;
            } else if ((fds[1 - i] >= 0) && (write(fds[1 - i], buf, n) != n)) {
                return -1;
            }
        }
    }
    return 0;
}

} // namespace

TEST(SoftibWireXproc, UdpBetweenNetworkNamespaces)
{
    netns_guard guard;

    if (guard.ret == 1) {
        GTEST_SKIP() << "cannot create network namespaces here";
    }
    ASSERT_EQ(0, guard.ret);

    echo_args        echo_side = {SOFTIB_WIRE_AUTO, guard.ns.addr[1], kPings, &guard.ns, 1};
    echo_args        ping_side = {SOFTIB_WIRE_AUTO, guard.ns.addr[0], kPings, &guard.ns, 0};
    axon_test_peer_t echo, ping;

    /* Each child in its namespace, on its veth address: they reach each other by UDP only. */
    ASSERT_EQ(0, axon_test_peer_spawn(&echo, echo_child, &echo_side, kChildTimeout));
    ASSERT_EQ(0, axon_test_peer_spawn(&ping, ping_child, &ping_side, kChildTimeout));
    EXPECT_EQ(0, relay(echo.fd, ping.fd, kChildTimeout));
    EXPECT_EQ(0, axon_test_peer_wait(&ping, kChildTimeout));
    EXPECT_EQ(0, axon_test_peer_wait(&echo, kChildTimeout));
}

TEST(SoftibWireXproc, ShmDoorbellAcrossNetworkNamespaces)
{
    netns_guard guard;

    if (guard.ret == 1) {
        GTEST_SKIP() << "cannot create network namespaces here";
    }
    ASSERT_EQ(0, guard.ret);
    doorbell_wakes(SOFTIB_WIRE_SHM, &guard.ns);
}

/* ---------------------------------------------------------------- contention */

namespace {

const unsigned kProducers        = 3;
const unsigned kPerProducer      = 3000;

/* Child: send kPerProducer packets numbered (id << 24 | i) to the test's slot. */
int producer_child(int fd, void *arg)
{
    softib_wire_params_t params = wire_params(SOFTIB_WIRE_SHM);
    uint32_t             id     = (uint32_t)(uintptr_t)arg;
    uint8_t              pkt[200];
    softib_wire_t       *wire;
    hello                peer;
    uint32_t             i;
    int                  ret = 0;

    if (softib_wire_open(&params, &wire) != 0) {
        return 10;
    }
    if (hello_exchange(fd, wire, &peer) != 0) {
        ret = 11;
    }
    for (i = 0; (i < kPerProducer) && (ret == 0); ++i) {
        pkt_make(pkt, (id << 24) | i, 16 + (i % 180));
        if (send_retry(wire, &peer.gid, qpn_of(peer.slot), pkt, 16 + (i % 180)) != 0) {
            ret = 12;
        }
    }
    axon_test_sync(fd);
    softib_wire_close(wire);
    return ret;
}

} // namespace

TEST(SoftibWireXproc, ManyProducersOneRing)
{
    softib_wire_params_t params = wire_params(SOFTIB_WIRE_SHM);
    axon_test_peer_t     child[kProducers];
    uint32_t             next[kProducers] = {0};
    static uint8_t       pkt[SOFTIB_WIRE_MAX_PKT];
    softib_wire_t       *wire;
    axon_dev_gid_t       src;
    hello                peer;
    uint32_t             seq, id, total = 0;
    ssize_t              n;
    unsigned             p;
    double               deadline;

    ASSERT_EQ(0, softib_wire_open(&params, &wire));
    for (p = 0; p < kProducers; ++p) {
        ASSERT_EQ(0, axon_test_peer_spawn(&child[p], producer_child, (void*)(uintptr_t)p,
                                          kChildTimeout));
    }
    for (p = 0; p < kProducers; ++p) {
        ASSERT_EQ(0, hello_exchange(child[p].fd, wire, &peer));
    }
    deadline = now_sec() + kChildTimeout;
    while ((total < kProducers * kPerProducer) && (now_sec() < deadline)) {
        n = wire_recv(wire, pkt, &src);
        if (n == 0) {
            usleep(10);
            continue;
        }
        ASSERT_TRUE(pkt_check(pkt, n, &seq)) << "packet " << total;
        id = seq >> 24;
        ASSERT_LT(id, kProducers);
        ASSERT_EQ(next[id], seq & 0xffffff) << "producer " << id;   /* each in its order */
        ++next[id];
        ++total;
    }
    EXPECT_EQ(kProducers * kPerProducer, total);
    EXPECT_EQ(0, wire_recv(wire, pkt, &src));
    for (p = 0; p < kProducers; ++p) {
        EXPECT_EQ(0, axon_test_sync(child[p].fd));
        EXPECT_EQ(0, axon_test_peer_wait(&child[p], kChildTimeout));
    }
    softib_wire_close(wire);
}

/* ---------------------------------------------------------------- injection */

namespace {

/* Send count numbered packets from a wire with injection to a plain one; what arrived, in order. */
std::vector<uint32_t> inject_run(double loss, double dup, double reorder, unsigned seed,
                                 unsigned count, softib_wire_mode_t mode = SOFTIB_WIRE_SHM)
{
    softib_wire_params_t params = wire_params(mode);
    std::vector<uint32_t> got;
    uint8_t              pkt[64];
    softib_wire_t       *tx, *rx;
    axon_dev_gid_t       gid, src;
    uint32_t             seq, i;
    ssize_t              n;
    double               deadline;

    if (softib_wire_open(&params, &rx) != 0) {
        ADD_FAILURE() << "open rx";
        return got;
    }
    params.loss    = loss;
    params.dup     = dup;
    params.reorder = reorder;
    params.seed    = seed;
    if (softib_wire_open(&params, &tx) != 0) {
        ADD_FAILURE() << "open tx";
        softib_wire_close(rx);
        return got;
    }
    softib_wire_gid(rx, &gid);
    for (i = 0; i < count; ++i) {
        pkt_make(pkt, i, sizeof(pkt));
        if (send_retry(tx, &gid, qpn_of(softib_wire_slot(rx)), pkt, sizeof(pkt)) != 0) {
            ADD_FAILURE() << "send " << i;
            break;
        }
        /* Drain as we go: the ring holds a few hundred packets. */
        while ((n = wire_recv(rx, pkt, &src)) > 0) {
            if (pkt_check(pkt, n, &seq)) {
                got.push_back(seq);
            } else {
                ADD_FAILURE() << "corrupt packet";
            }
        }
    }
    /* Held packets leave within 200 us of progress. */
    deadline = now_sec() + 0.5;
    while (now_sec() < deadline) {
        softib_wire_progress(tx, axon_sys_time_ns());
        while ((n = wire_recv(rx, pkt, &src)) > 0) {
            if (pkt_check(pkt, n, &seq)) {
                got.push_back(seq);
            }
        }
        if ((softib_wire_next_due_ns(tx) == 0) && (mode == SOFTIB_WIRE_SHM)) {
            break;
        }
        usleep(100);
    }
    softib_wire_close(tx);
    softib_wire_close(rx);
    return got;
}

} // namespace

TEST(SoftibWire, InjectedLossRateRoughlyRight)
{
    std::vector<uint32_t> got = inject_run(0.5, 0, 0, 0, 10000);

    /* 5000 expected, standard deviation 50. */
    EXPECT_GT(got.size(), 4500u);
    EXPECT_LT(got.size(), 5500u);
    for (size_t i = 1; i < got.size(); ++i) {
        ASSERT_LT(got[i - 1], got[i]);   /* loss alone neither reorders nor duplicates */
    }
}

TEST(SoftibWire, InjectedLossOverUdp)
{
    std::vector<uint32_t> got = inject_run(0.25, 0, 0, 0, 2000, SOFTIB_WIRE_UDP);

    EXPECT_GT(got.size(), 1300u);
    EXPECT_LT(got.size(), 1700u);
}

TEST(SoftibWire, InjectedDupDuplicates)
{
    std::vector<uint32_t> got = inject_run(0, 0.5, 0, 0, 10000);
    std::vector<unsigned> seen(10000, 0);

    EXPECT_GT(got.size(), 14500u);
    EXPECT_LT(got.size(), 15500u);
    for (uint32_t seq : got) {
        ASSERT_LT(seq, 10000u);
        ++seen[seq];
    }
    for (unsigned i = 0; i < 10000; ++i) {
        ASSERT_GE(seen[i], 1u) << i;
        ASSERT_LE(seen[i], 2u) << i;
    }
}

TEST(SoftibWire, InjectedReorderReorders)
{
    std::vector<uint32_t> got = inject_run(0, 0, 0.2, 0, 3000);
    std::vector<unsigned> seen(3000, 0);
    unsigned              inversions = 0;

    ASSERT_EQ(3000u, got.size());   /* everything arrives, once */
    for (size_t i = 0; i < got.size(); ++i) {
        ++seen[got[i]];
        if ((i > 0) && (got[i] < got[i - 1])) {
            ++inversions;
        }
    }
    for (unsigned i = 0; i < 3000; ++i) {
        ASSERT_EQ(1u, seen[i]) << i;
    }
    EXPECT_GT(inversions, 100u);   /* about 600 expected */
}

TEST(SoftibWire, HeldPacketReleasedByProgress)
{
    softib_wire_params_t params = wire_params(SOFTIB_WIRE_SHM);
    uint8_t              pkt[64];
    softib_wire_t       *tx, *rx;
    axon_dev_gid_t       gid, src;
    uint64_t             due;

    ASSERT_EQ(0, softib_wire_open(&params, &rx));
    params.reorder = 1.0;
    ASSERT_EQ(0, softib_wire_open(&params, &tx));
    softib_wire_gid(rx, &gid);
    pkt_make(pkt, 0, sizeof(pkt));
    ASSERT_EQ(0, softib_wire_send(tx, &gid, qpn_of(softib_wire_slot(rx)), pkt, sizeof(pkt)));
    due = softib_wire_next_due_ns(tx);
    EXPECT_NE(0u, due);
    EXPECT_EQ(0, wire_recv(rx, pkt, &src));   /* held */
    usleep(1000);
    softib_wire_progress(tx, axon_sys_time_ns());
    /* nothing held: what is due next is the once-a-second look at mapped rings, if any */
    due = softib_wire_next_due_ns(tx);
    EXPECT_TRUE((due == 0) || (due > axon_sys_time_ns() + 500000000ull)) << "a packet is held";
    EXPECT_EQ((ssize_t)sizeof(pkt), wire_recv(rx, pkt, &src));
    softib_wire_close(tx);
    softib_wire_close(rx);
}

TEST(SoftibWire, InjectionSeedReplays)
{
    std::vector<uint32_t> a = inject_run(0.3, 0, 0, 42, 1000);
    std::vector<uint32_t> b = inject_run(0.3, 0, 0, 42, 1000);
    std::vector<uint32_t> c = inject_run(0.3, 0, 0, 43, 1000);

    EXPECT_EQ(a, b);
    EXPECT_NE(a, c);
}
