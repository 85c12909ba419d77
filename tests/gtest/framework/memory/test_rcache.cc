/*
 * Registration cache and memory monitor (framework/memory), against a fake
 * device that records registrations: hits, merging, eviction, and the
 * cases that make caches wrong elsewhere — memory unmapped, trimmed,
 * remapped or freed and allocated again at the same address.
 */
#include <gtest/gtest.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>
#include <atomic>
#include <mutex>
#include <vector>

#include "harness.h"

extern "C" {
#include "memmon.h"
#include "rcache.h"
}

namespace {

struct FakeReg {
    uintptr_t start;
    size_t    length;
    bool      live;
};

/* Thread safe, as devices are. */
struct FakeDevice {
    std::vector<FakeReg> regs;
    unsigned             live = 0;
    axon_status_t        fail = AXON_OK;   /* what the next registrations return */
    std::mutex           lock;

    bool is_live(void *memh)
    {
        std::lock_guard<std::mutex> g(lock);
        return regs.at((uintptr_t)memh - 1).live;
    }
};

axon_status_t fake_reg(void *arg, void *addr, size_t length, void **memh_p)
{
    FakeDevice *dev = static_cast<FakeDevice *>(arg);
    std::lock_guard<std::mutex> g(dev->lock);

    if (dev->fail != AXON_OK) {
        return dev->fail;
    }
    dev->regs.push_back({(uintptr_t)addr, length, true});
    ++dev->live;
    *memh_p = (void *)(uintptr_t)dev->regs.size();   /* 1-based index */
    return AXON_OK;
}

void fake_dereg(void *arg, void *memh)
{
    FakeDevice *dev = static_cast<FakeDevice *>(arg);
    std::lock_guard<std::mutex> g(dev->lock);
    FakeReg &reg = dev->regs.at((uintptr_t)memh - 1);

    ASSERT_TRUE(reg.live) << "deregistered twice";
    reg.live = false;
    --dev->live;
}

const axon_rcache_ops_t fake_ops = {fake_reg, fake_dereg};

const size_t kPage = 4096;

class Rcache : public ::testing::Test {
protected:
    void SetUp() override { create(16); }

    void TearDown() override
    {
        if (rcache_ != NULL) {
            axon_rcache_destroy(rcache_);
        }
        EXPECT_EQ(0u, dev_.live) << "registrations left after destroy";
    }

    void create(unsigned max_unused)
    {
        axon_rcache_params_t params = {"test", &fake_ops, &dev_, max_unused};
        axon_status_t status;

        if (rcache_ != NULL) {
            axon_rcache_destroy(rcache_);
            rcache_ = NULL;
        }
        status = axon_rcache_create(&params, &rcache_);
        ASSERT_EQ(AXON_OK, status);
        if (!axon_rcache_is_caching(rcache_)) {
            GTEST_SKIP() << "this kernel does not let the process watch its memory";
        }
    }

    axon_rcache_region_t *get(void *addr, size_t length)
    {
        axon_rcache_region_t *region = NULL;

        EXPECT_EQ(AXON_OK, axon_rcache_get(rcache_, addr, length, &region));
        if (region != NULL) {
            EXPECT_LE(region->start, (uintptr_t)addr);
            EXPECT_GE(region->end, (uintptr_t)addr + length);
        }
        return region;
    }

    /* get then put: one zero-copy operation's use of the buffer */
    void use(void *addr, size_t length)
    {
        axon_rcache_region_t *region = get(addr, length);

        if (region != NULL) {
            axon_rcache_put(rcache_, region);
        }
    }

    axon_rcache_stats_t stats()
    {
        axon_rcache_stats_t s;

        axon_rcache_get_stats(rcache_, &s);
        return s;
    }

    static void *map(size_t length, void *hint = NULL)
    {
        void *p = mmap(hint, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

        EXPECT_NE(MAP_FAILED, p);
        memset(p, 1, length);
        return p;
    }

    FakeDevice     dev_;
    axon_rcache_t *rcache_ = NULL;
};

TEST_F(Rcache, SameBufferRegisteredOnce)
{
    void *buf = map(64 * 1024);

    for (int i = 0; i < 1000; ++i) {
        use(buf, 64 * 1024);
    }
    EXPECT_EQ(1u, dev_.regs.size());
    EXPECT_EQ(999u, stats().hits);
    EXPECT_EQ(1u, stats().misses);
    munmap(buf, 64 * 1024);
}

TEST_F(Rcache, RegionsArePageAlignedAndSubrangesHit)
{
    char *buf = static_cast<char *>(map(4 * kPage));

    use(buf + 100, 2 * kPage);
    ASSERT_EQ(1u, dev_.regs.size());
    EXPECT_EQ((uintptr_t)buf, dev_.regs[0].start);
    EXPECT_EQ(3 * kPage, dev_.regs[0].length);
    use(buf + kPage, 10);
    use(buf, 1);
    EXPECT_EQ(1u, dev_.regs.size());
    munmap(buf, 4 * kPage);
}

TEST_F(Rcache, OverlappingRequestsMergeIntoOneRegion)
{
    char *buf = static_cast<char *>(map(8 * kPage));

    use(buf, 2 * kPage);
    use(buf + 4 * kPage, 2 * kPage);
    use(buf + kPage, 4 * kPage);   /* touches both */
    ASSERT_EQ(3u, dev_.regs.size());
    EXPECT_EQ((uintptr_t)buf, dev_.regs[2].start);
    EXPECT_EQ(6 * kPage, dev_.regs[2].length);
    EXPECT_FALSE(dev_.regs[0].live);
    EXPECT_FALSE(dev_.regs[1].live);
    use(buf + 5 * kPage, kPage);
    EXPECT_EQ(3u, dev_.regs.size());
    munmap(buf, 8 * kPage);
}

TEST_F(Rcache, RegionInUseSurvivesReplacementUntilPut)
{
    char *buf = static_cast<char *>(map(4 * kPage));
    axon_rcache_region_t *held = get(buf, kPage);

    use(buf, 3 * kPage);   /* replaces the held region in the index */
    ASSERT_EQ(2u, dev_.regs.size());
    EXPECT_TRUE(dev_.regs[0].live);
    axon_rcache_put(rcache_, held);
    EXPECT_FALSE(dev_.regs[0].live);
    munmap(buf, 4 * kPage);
}

TEST_F(Rcache, UnusedRegionsAreBounded)
{
    const int n = 40;
    std::vector<void *> bufs;

    create(8);
    for (int i = 0; i < n; ++i) {
        bufs.push_back(map(kPage));
        use(bufs.back(), kPage);
    }
    EXPECT_EQ(8u, dev_.live);
    use(bufs.back(), kPage);   /* the most recent is still cached */
    EXPECT_EQ((size_t)n, dev_.regs.size());
    use(bufs.front(), kPage);  /* the oldest was evicted */
    EXPECT_EQ((size_t)n + 1, dev_.regs.size());
    for (void *b : bufs) {
        munmap(b, kPage);
    }
}

TEST_F(Rcache, MunmapInvalidatesBeforeItReturns)
{
    const size_t len = 16 * kPage;
    void *buf = map(len);

    use(buf, len);
    ASSERT_EQ(0, munmap(buf, len));
    EXPECT_EQ(1u, stats().invalidated);
    axon_rcache_collect(rcache_);
    EXPECT_FALSE(dev_.regs[0].live);
}

/* New pages at the same address (mmap MAP_FIXED unmaps the old ones first). */
TEST_F(Rcache, NewPagesAtTheSameAddressRegisterAgain)
{
    const size_t len = 16 * kPage;
    void *buf = map(len);

    use(buf, len);
    ASSERT_EQ(buf, mmap(buf, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                        -1, 0));
    use(buf, len);
    EXPECT_EQ(2u, dev_.regs.size());
    EXPECT_FALSE(dev_.regs[0].live);
    EXPECT_EQ(1u, stats().invalidated);
    munmap(buf, len);
}

/*
 * free() gives a large block back with munmap; malloc maps it again, often at
 * the same address, with other pages. (Freed memory malloc keeps mapped has
 * the same pages: a hit on it is right, so the threshold is fixed here.)
 */
TEST_F(Rcache, FreeAndMallocAtTheSameAddressRegistersAgain)
{
    const size_t len = 1 << 20;
    int same = 0;

    if (mallopt(M_MMAP_THRESHOLD, 256 * 1024) != 1) {
        /* ASan's, whose quarantine never hands a freed block back at once */
        GTEST_SKIP() << "not glibc's allocator (MunmapInvalidates* covers the case)";
    }

    for (int round = 0; round < 5; ++round) {
        char *buf = static_cast<char *>(malloc(len));
        size_t before = dev_.regs.size();

        ASSERT_NE(nullptr, buf);
        memset(buf, round, len);
        use(buf, len);
        use(buf, len);
        EXPECT_EQ(before + 1, dev_.regs.size()) << "round " << round;
        free(buf);
        char *next = static_cast<char *>(malloc(len));
        same += (next == buf);
        free(next);
    }
    EXPECT_GT(same, 0) << "malloc never gave the same address back: the case is untested";
    EXPECT_GE(stats().invalidated, 5u);
}

TEST_F(Rcache, MadviseDontneedInvalidates)
{
    char *buf = static_cast<char *>(map(8 * kPage));

    use(buf, 8 * kPage);
    ASSERT_EQ(0, madvise(buf + 2 * kPage, kPage, MADV_DONTNEED));
    use(buf, 8 * kPage);
    EXPECT_EQ(2u, dev_.regs.size());
    munmap(buf, 8 * kPage);
}

TEST_F(Rcache, MremapInvalidatesTheOldRange)
{
    char *buf = static_cast<char *>(map(4 * kPage));
    void *moved;

    use(buf, 4 * kPage);
    moved = mremap(buf, 4 * kPage, 64 * kPage, MREMAP_MAYMOVE);
    ASSERT_NE(MAP_FAILED, moved);
    EXPECT_EQ(1u, stats().invalidated);
    axon_rcache_collect(rcache_);   /* the owner deregisters what the monitor dropped */
    EXPECT_FALSE(dev_.regs[0].live);
    munmap(moved, 64 * kPage);
}

TEST_F(Rcache, UnmapWhileInUseDeregistersAtPut)
{
    void *buf = map(4 * kPage);
    axon_rcache_region_t *held = get(buf, 4 * kPage);

    munmap(buf, 4 * kPage);
    EXPECT_TRUE(dev_.regs[0].live);   /* an operation still uses it */
    axon_rcache_put(rcache_, held);
    EXPECT_FALSE(dev_.regs[0].live);
}

TEST_F(Rcache, FileMappingIsRegisteredPerUse)
{
    char path[] = "/tmp/axon_rcache_XXXXXX";
    int fd = mkstemp(path);
    void *buf;

    ASSERT_GE(fd, 0);
    unlink(path);
    ASSERT_EQ(0, ftruncate(fd, 4 * kPage));
    buf = mmap(NULL, 4 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    ASSERT_NE(MAP_FAILED, buf);
    use(buf, 4 * kPage);
    use(buf, 4 * kPage);
    EXPECT_EQ(2u, dev_.regs.size());
    EXPECT_EQ(0u, dev_.live);
    EXPECT_EQ(2u, stats().uncached);
    munmap(buf, 4 * kPage);
    close(fd);
}

TEST_F(Rcache, DeviceErrorsReachTheCaller)
{
    void *buf = map(kPage);
    axon_rcache_region_t *region = NULL;

    dev_.fail = AXON_ERR_NO_RESOURCE;
    EXPECT_EQ(AXON_ERR_NO_RESOURCE, axon_rcache_get(rcache_, buf, kPage, &region));
    dev_.fail = AXON_OK;
    use(buf, kPage);
    EXPECT_EQ(1u, dev_.regs.size());
    munmap(buf, kPage);
}

/* Another thread replacing cached memory must neither hang nor leave a stale region. */
TEST_F(Rcache, UnmapFromAnotherThread)
{
    const int rounds = 200;
    const size_t len = 8 * kPage;
    void *buf = map(len);

    for (int i = 0; i < rounds; ++i) {
        pthread_t t;

        use(buf, len);
        ASSERT_EQ(0, pthread_create(&t, NULL, [](void *p) -> void * {
            /* new pages where the cached ones were: the old ones are unmapped */
            return mmap(p, 8 * 4096, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        }, buf));
        void *again;
        pthread_join(t, &again);
        ASSERT_EQ(buf, again);
        size_t before = dev_.regs.size();
        use(buf, len);
        ASSERT_EQ(before + 1, dev_.regs.size()) << "stale region hit in round " << i;
    }
    munmap(buf, len);
}

/*
 * The workers of one memory domain share its cache from their own threads:
 * overlapping gets and puts, merges, evictions and unmaps from all of them
 * at once keep every region registered and covering what was asked, and
 * lose none (destroy then finds every registration: TearDown counts).
 */
TEST_F(Rcache, SharedByThreads)
{
    struct Ctx {
        axon_rcache_t     *rcache;
        FakeDevice        *dev;
        char              *buf;
        int                seed;
        int                bad;
        pthread_barrier_t *start;
    };
    const int kThreads = 4;
    const size_t kPages = 64;
    char *buf = static_cast<char *>(map(kPages * kPage));
    pthread_t threads[kThreads];
    Ctx ctx[kThreads];
    pthread_barrier_t start;

    ASSERT_NO_FATAL_FAILURE(create(2));   /* few kept: misses and evictions all the time */
    pthread_barrier_init(&start, NULL, kThreads);
    for (int t = 0; t < kThreads; ++t) {
        ctx[t] = {rcache_, &dev_, buf, t + 1, 0, &start};
        ASSERT_EQ(0, pthread_create(&threads[t], NULL, [](void *arg) -> void * {
            Ctx *c = static_cast<Ctx *>(arg);
            unsigned r = (unsigned)c->seed;

            pthread_barrier_wait(c->start);
            for (int i = 0; i < 40000; ++i) {
                size_t first = rand_r(&r) % 60, pages = 1 + rand_r(&r) % 4;
                char *addr = c->buf + first * kPage + rand_r(&r) % 100;
                axon_rcache_region_t *region = NULL;

                if ((c->seed == 1) && (i % 2000 == 1999)) {
                    /* new pages over part of the buffer: the monitor drops what covered them */
                    mmap(c->buf + 8 * kPage, 4 * kPage, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
                }
                if (axon_rcache_get(c->rcache, addr, pages * kPage - 200, &region) !=
                    AXON_OK) {
                    ++c->bad;
                    continue;
                }
                c->bad += (region->start > (uintptr_t)addr) ||
                          (region->end < (uintptr_t)addr + pages * kPage - 200) ||
                          !c->dev->is_live(region->memh);
                axon_rcache_put(c->rcache, region);
            }
            return NULL;
        }, &ctx[t]));
    }
    for (int t = 0; t < kThreads; ++t) {
        pthread_join(threads[t], NULL);
        EXPECT_EQ(0, ctx[t].bad) << "thread " << t;
    }
    pthread_barrier_destroy(&start);
    axon_rcache_collect(rcache_);
    EXPECT_LE(dev_.live, 2u) << "more registrations alive than unused regions kept";
    munmap(buf, kPages * kPage);
}

/* The child of a fork unmaps memory the parent watches: no event, no hang. */
/* Xproc: forks a peer process, too slow under valgrind (tests/README.md). */
class RcacheXproc : public Rcache {};

TEST_F(RcacheXproc, ForkedChildUnmapsWithoutHanging)
{
    void *buf = map(4 * kPage);
    pid_t pid;
    int status = 0;

    use(buf, 4 * kPage);
    pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        alarm(10);
        munmap(buf, 4 * kPage);
        void *other = mmap(NULL, kPage, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        munmap(other, kPage);
        _exit(axon_memmon_watch((uintptr_t)other, kPage) == AXON_ERR_UNSUPPORTED ? 0 : 3);
    }
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0)) << "status " << status;
    use(buf, 4 * kPage);   /* the parent's region is untouched */
    EXPECT_EQ(1u, dev_.regs.size());
    munmap(buf, 4 * kPage);
}

/*
 * The monitor stops with its last cache while a forked child lives: the
 * child's copy of the userfaultfd must not keep the parent's memory watched,
 * or the parent's next unmap waits for a reader that has exited (until the
 * child exits: a watchdog kills it after 5 s, and the test fails).
 */
TEST_F(RcacheXproc, WatchEndsWithTheMonitorWhileAForkedChildLives)
{
    int   hold[2];
    pid_t pid;

    /* A monitor of this test's own: the fixture's cache is its only subscriber. */
    axon_rcache_destroy(rcache_);
    rcache_ = NULL;
    create(16);
    void *buf = map(4 * kPage);
    use(buf, 4 * kPage);
    ASSERT_EQ(0, pipe(hold));
    pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        char c;
        close(hold[1]);
        alarm(30);
        _exit(read(hold[0], &c, 1) == 0 ? 0 : 3);   /* until the parent closes its end */
    }
    close(hold[0]);
    axon_rcache_destroy(rcache_);   /* the last subscriber: the monitor stops */
    rcache_ = NULL;

    struct Watchdog {
        pid_t             child;
        std::atomic<bool> done{false};
    } dog;
    dog.child = pid;
    pthread_t thread;
    ASSERT_EQ(0, pthread_create(&thread, NULL, [](void *arg) -> void * {
        Watchdog *d = static_cast<Watchdog *>(arg);
        for (int i = 0; (i < 500) && !d->done; ++i) {
            usleep(10000);
        }
        if (!d->done) {
            kill(d->child, SIGKILL);
        }
        return NULL;
    }, &dog));
    double t0 = axon_test_time();
    munmap(buf, 4 * kPage);
    double took = axon_test_time() - t0;
    dog.done = true;
    pthread_join(thread, NULL);
    close(hold[1]);
    int status = 0;
    ASSERT_EQ(pid, waitpid(pid, &status, 0));
    EXPECT_LT(took, 2.0) << "munmap waited " << took << " s for the stopped monitor";
    EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0)) << "child status " << status;
}

TEST_F(Rcache, DestroyDeregistersEverything)
{
    void *a = map(kPage), *b = map(kPage);

    use(a, kPage);
    use(b, kPage);
    EXPECT_EQ(2u, dev_.live);
    axon_rcache_destroy(rcache_);
    rcache_ = NULL;
    EXPECT_EQ(0u, dev_.live);
    munmap(a, kPage);
    munmap(b, kPage);
}

}  // namespace
