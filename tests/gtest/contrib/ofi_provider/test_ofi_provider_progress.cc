/*
 * FI_PROGRESS_AUTO: a domain asking for it gets a progress thread, so a
 * target that never calls libfabric still serves an initiator's RMA and
 * atomics (over tcp they need the target's worker) and counts its RMA
 * events; idle, the thread sleeps rather than burning a core; it leaves
 * alone the endpoints the application polls itself, and only those.
 */
#include "ofi_test_node.h"

#include "env_guard.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_rma.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

namespace {

const uint64_t kCaps = FI_TAGGED | FI_RMA | FI_ATOMIC | FI_RMA_EVENT;
const uint64_t kKey = 5;

double process_cpu_sec()
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

class OfiProviderProgress : public OfiProvider {};

TEST_F(OfiProviderProgress, AutoProgressIsAnsweredWhenAsked)
{
    struct fi_info *hints = ompi_hints(), *info = NULL;
    ASSERT_EQ(0, getinfo(hints, &info));
    EXPECT_EQ(FI_PROGRESS_MANUAL, info->domain_attr->data_progress);   /* the default */
    fi_freeinfo(info);
    hints->domain_attr->data_progress = FI_PROGRESS_AUTO;
    ASSERT_EQ(0, getinfo(hints, &info));
    EXPECT_EQ(FI_PROGRESS_AUTO, info->domain_attr->data_progress);
    fi_freeinfo(info);
    fi_freeinfo(hints);
}

/* An endpoint of an FI_PROGRESS_AUTO domain, left idle by the tests below. */
int open_auto_node(Node &n)
{
    n.caps = kCaps;
    n.mr_mode = FI_MR_LOCAL;
    n.auto_progress = true;
    return n.open();
}

/* The process sleeps a second with an idle auto-progress endpoint open: its CPU time is
 * the thread's, far below a core's second. */
TEST_F(OfiProviderProgress, IdleThreadSleeps)
{
    Node n;
    ASSERT_EQ(0, open_auto_node(n));
    double start = process_cpu_sec();
    struct timespec second = {1, 0};
    nanosleep(&second, NULL);
    double used = process_cpu_sec() - start;
    EXPECT_LT(used, 0.1) << "the idle progress thread used " << used << " s of CPU in 1 s";
}

/* Context switches of this process's thread named name, -1 if there is none. */
long thread_switches(const char *name)
{
    char  path[300], comm[32], line[128];   /* d_name: up to 255 bytes */
    DIR  *dir = opendir("/proc/self/task");
    long  total = -1, n;
    struct dirent *de;

    while ((dir != NULL) && ((de = readdir(dir)) != NULL)) {
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", de->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL) {
            continue;
        }
        bool ours = (fgets(comm, sizeof(comm), f) != NULL) && (strncmp(comm, name, strlen(name)) == 0);
        fclose(f);
        if (!ours) {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/self/task/%s/status", de->d_name);
        f = fopen(path, "r");
        total = 0;
        while ((f != NULL) && (fgets(line, sizeof(line), f) != NULL)) {
            if ((sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1) ||
                (sscanf(line, "nonvoluntary_ctxt_switches: %ld", &n) == 1)) {
                total += n;
            }
        }
        if (f != NULL) {
            fclose(f);
        }
    }
    if (dir != NULL) {
        closedir(dir);
    }
    return total;
}

/* Idle over transports it can wait for (shm, tcp, self), the thread sleeps on its workers'
 * descriptors: a handful of wake-ups a second (its sleep's bound), not a nap a millisecond
 * (a context switch on a core another process may be busy on). */
TEST_F(OfiProviderProgress, IdleThreadWakesRarely)
{
    Node n;
    ASSERT_EQ(0, open_auto_node(n));
    struct timespec settle = {0, 100000000}, second = {1, 0};
    nanosleep(&settle, NULL);   /* past the naps after start-up */
    long before = thread_switches("axon-fi-prog");
    ASSERT_GE(before, 0) << "no thread named axon-fi-prog";
    nanosleep(&second, NULL);
    long woke = thread_switches("axon-fi-prog") - before;
    EXPECT_LT(woke, 60) << "the idle progress thread woke " << woke << " times in 1 s";
}

const int kRounds = 200;

/* The initiator: kRounds writes and atomic adds, each waited for; then it reports. */
int initiator_main(int rd, int wr)
{
    char peer[64];
    if (read(rd, peer, sizeof(peer)) != (ssize_t)sizeof(peer)) return 9;
    Node n;
    n.caps = FI_TAGGED | FI_RMA | FI_ATOMIC;
    n.mr_mode = FI_MR_LOCAL;
    if (n.open() != 0) return 10;
    fi_addr_t p = n.insert(peer);
    struct fi_context ctx;
    struct fi_cq_tagged_entry e;
    uint64_t fetched = 0;
    for (int i = 0; i < kRounds; ++i) {
        uint64_t v = i + 1, one = 1, old = 0;
        if (fi_write(n.ep, &v, 8, NULL, p, 0, kKey, &ctx) != 0) return 11;
        if (wait_cq(n, {}, &e) != 1) return 12;
        if (fi_fetch_atomic(n.ep, &one, 1, NULL, &old, NULL, p, 8, kKey, FI_UINT64, FI_SUM,
                            &ctx) != 0) return 13;
        if (wait_cq(n, {}, &e) != 1) return 14;
        fetched += old;
    }
    if (write(wr, &fetched, 8) != 8) return 15;
    fcntl(rd, F_SETFL, O_NONBLOCK);
    for (;;) {   /* progress (the last event may still be leaving) until told to go */
        char done;
        (void)fi_cq_read(n.cq, &e, 0);
        ssize_t got = read(rd, &done, 1);
        if (got == 0) return 16;
        if (got == 1) return 0;
    }
}

const int kCountedWrites = 300;

/*
 * An initiator with auto progress (FI_THREAD_DOMAIN: its counters are read
 * without the lock once nothing is in flight) writes kCountedWrites times
 * without waiting, then reads its FI_WRITE counter until it shows them all:
 * every value read never falls, never passes the count, and ends exact,
 * errors none. Reports the last value, or an error code.
 */
int counting_initiator_main(int rd, int wr)
{
    char peer[64];
    if (read(rd, peer, sizeof(peer)) != (ssize_t)sizeof(peer)) return 9;
    Node n;
    n.caps = FI_TAGGED | FI_RMA;
    n.mr_mode = FI_MR_LOCAL;
    n.auto_progress = true;
    n.rma_counters = true;
    if (n.open() != 0) return 10;
    fi_addr_t p = n.insert(peer);
    std::vector<uint64_t> src(kCountedWrites);
    for (int i = 0; i < kCountedWrites; ++i) {
        src[i] = i + 1;
        ssize_t r;
        while ((r = fi_inject_write(n.ep, &src[i], 8, p, 8 * (i % 64), kKey)) == -FI_EAGAIN) {
            (void)fi_cntr_read(n.wr_cntr);
        }
        if (r != 0) return 11;
    }
    uint64_t last = 0, v = 0;
    double deadline = now_sec() + 20;
    while ((v = fi_cntr_read(n.wr_cntr)) < (uint64_t)kCountedWrites) {
        if ((v < last) || (now_sec() > deadline)) return 12;
        last = v;
    }
    if ((v != (uint64_t)kCountedWrites) || (fi_cntr_readerr(n.wr_cntr) != 0)) return 13;
    if (fi_cntr_wait(n.wr_cntr, kCountedWrites, 1000) != 0) return 14;
    if (write(wr, &v, 8) != 8) return 15;
    char done;
    return (read(rd, &done, 1) == 1) ? 0 : 16;
}

class OfiProviderProgressXproc : public OfiProvider,
                                 public ::testing::WithParamInterface<std::string> {
protected:
    Child                 c;
    Node                  t;
    std::vector<uint64_t> mem = std::vector<uint64_t>(64);
    struct fid_mr        *mr  = NULL;

    /* The child runs main(rd, wr); the target opens its endpoint (auto progress) and
     * a region of mem under kKey, and tells the child its name. */
    void start(int (*main)(int, int))
    {
        use_build_provider();
        c.start([main](int rd, int wr) { _exit(main(rd, wr)); });
        t.caps          = kCaps;
        t.mr_mode       = FI_MR_LOCAL;
        t.auto_progress = true;
        ASSERT_EQ(0, t.open());
        ASSERT_EQ(0, fi_mr_reg(t.domain, mem.data(), 512, FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
                               kKey, 0, &mr, NULL));
    }

    void tell_name() { ASSERT_EQ((ssize_t)sizeof(t.name), write(c.to[1], t.name, sizeof(t.name))); }

    /* Let the child go and reap it; close the region. */
    void finish()
    {
        ASSERT_EQ(1, write(c.to[1], "q", 1));
        c.finish();
        EXPECT_EQ(0, fi_close(&mr->fid));
    }
};

/*
 * The target opens its endpoint and region, then only blocks on a pipe: the
 * initiator's operations complete all the same (over tcp an atomic needs
 * the target's worker), and the region's counter ends exact.
 */
TEST_P(OfiProviderProgressXproc, TargetThatNeverCallsServesRmaAndAtomics)
{
    EnvGuard env("AXON_TLS", GetParam().c_str());
    ASSERT_NO_FATAL_FAILURE(start(initiator_main));
    struct fid_cntr *writes = NULL;
    struct fi_cntr_attr attr = {};
    attr.events = FI_CNTR_EVENTS_COMP;
    ASSERT_EQ(0, fi_cntr_open(t.domain, &attr, &writes, NULL));
    ASSERT_EQ(0, fi_mr_bind(mr, &writes->fid, FI_REMOTE_WRITE));
    ASSERT_NO_FATAL_FAILURE(tell_name());
    uint64_t fetched = 0;
    ASSERT_EQ(8, read(c.from[0], &fetched, 8));   /* blocks: no provider call here */
    EXPECT_EQ((uint64_t)kRounds * (kRounds - 1) / 2, fetched);
    EXPECT_EQ((uint64_t)kRounds, ((volatile uint64_t *)mem.data())[0]);
    EXPECT_EQ((uint64_t)kRounds, ((volatile uint64_t *)mem.data())[1]);
    double deadline = now_sec() + 10;
    while ((fi_cntr_read(writes) < 2 * kRounds) && (now_sec() < deadline)) {
        usleep(1000);
    }
    EXPECT_EQ((uint64_t)(2 * kRounds), fi_cntr_read(writes));
    finish();
    EXPECT_EQ(0, fi_close(&writes->fid));
}

/*
 * The progress thread leaves alone the endpoints the application polls, not
 * the others: the target polls a second endpoint's CQ without a pause (the
 * domain's lock taken and given all the time) while the initiator's writes
 * and atomics to the first endpoint still complete (over either lane the
 * atomics on this unshared memory need the first endpoint's worker).
 */
TEST_P(OfiProviderProgressXproc, TargetPollingAnotherEndpointServesTheFirst)
{
    EnvGuard env("AXON_TLS", GetParam().c_str());
    ASSERT_NO_FATAL_FAILURE(start(initiator_main));
    struct fid_ep *ep2 = NULL;
    struct fid_cq *cq2 = NULL;
    ASSERT_EQ(0, t.open_second_ep(&ep2, &cq2));
    ASSERT_NO_FATAL_FAILURE(tell_name());
    fcntl(c.from[0], F_SETFL, O_NONBLOCK);
    uint64_t fetched = 0;
    struct fi_cq_tagged_entry e;
    double deadline = now_sec() + 30;
    ssize_t got = -1;
    while ((got != 8) && (now_sec() < deadline)) {
        EXPECT_EQ(-FI_EAGAIN, fi_cq_read(cq2, &e, 1));   /* ep2 only: nothing comes there */
        got = read(c.from[0], &fetched, 8);
    }
    ASSERT_EQ(8, got) << "the initiator's operations were not served in 30 s";
    EXPECT_EQ((uint64_t)kRounds * (kRounds - 1) / 2, fetched);
    EXPECT_EQ((uint64_t)kRounds, ((volatile uint64_t *)mem.data())[0]);
    EXPECT_EQ((uint64_t)kRounds, ((volatile uint64_t *)mem.data())[1]);
    finish();
    EXPECT_EQ(0, fi_close(&ep2->fid));
    EXPECT_EQ(0, fi_close(&cq2->fid));
}

TEST_P(OfiProviderProgressXproc, OwnWriteCounterEndsExactWithoutLock)
{
    EnvGuard env("AXON_TLS", GetParam().c_str());
    ASSERT_NO_FATAL_FAILURE(start(counting_initiator_main));
    ASSERT_NO_FATAL_FAILURE(tell_name());
    uint64_t counted = 0;
    ASSERT_EQ(8, read(c.from[0], &counted, 8)) << "the initiator failed: see its exit code";
    EXPECT_EQ((uint64_t)kCountedWrites, counted);
    finish();
}

INSTANTIATE_TEST_SUITE_P(Lanes, OfiProviderProgressXproc, ::testing::Values("shm", "tcp"),
                         [](const ::testing::TestParamInfo<std::string> &p) { return p.param; });

}  // namespace
