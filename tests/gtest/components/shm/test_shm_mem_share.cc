/*
 * The caller's memory moved into a segment (components/shm/shm_mem_share.h,
 * AXON_MEM_MAP_SHARED): contents and address kept, only whole pages moved
 * (and partial end pages of program data, never of the heap),
 * what must not move refused with nothing changed, zero pages not copied
 * (untouched ones not even read),
 * and unsharing gives private memory back (or leaves alone pages the caller
 * replaced meanwhile).
 */
#include <gtest/gtest.h>

#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "harness.h"
extern "C" {
#include "shm_mem_share.h"
}

namespace {

const size_t kPage = 4096;

/* The /proc/self/maps line of the mapping holding p ("" if none). */
std::string maps_line(const void *p)
{
    std::ifstream in("/proc/self/maps");
    std::string   line;
    uintptr_t     a = (uintptr_t)p;

    while (std::getline(in, line)) {
        unsigned long lo = 0, hi = 0;
        if ((sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2) && (a >= lo) && (a < hi)) {
            return line;
        }
    }
    return "";
}

bool is_segment(const void *p)
{
    return maps_line(p).find("memfd:axon-mem") != std::string::npos;
}

uint8_t *map_anon(size_t len, int flags = MAP_PRIVATE)
{
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, flags | MAP_ANONYMOUS, -1, 0);
    return (m == MAP_FAILED) ? nullptr : static_cast<uint8_t *>(m);
}

TEST(ShmMemShare, KeepsAddressAndContentsAndGivesThemBack)
{
    const size_t len = 16 * kPage;
    uint8_t     *m   = map_anon(len);
    ASSERT_NE(nullptr, m);
    axon_test_fill(m, 5 * kPage, 3);   /* pages 5.. stay zero, but for one */
    m[9 * kPage + 7] = 0x42;

    axon_mem_seg_t seg;
    ASSERT_EQ(AXON_OK, axon_mem_share(m, len, 0x1234, &seg));
    EXPECT_EQ(m, seg.address);
    EXPECT_EQ(len, seg.length);
    EXPECT_TRUE(is_segment(m)) << maps_line(m);
    EXPECT_EQ(-1, axon_test_check(m, 5 * kPage, 3)) << "contents lost by the move";
    EXPECT_EQ(0x42, m[9 * kPage + 7]);

    /* Another mapping of the segment (what a peer attaches) sees our writes and we its. */
    axon_proc_t self;
    axon_proc_self(&self);
    axon_mem_seg_t peer;
    ASSERT_EQ(AXON_OK, axon_mem_seg_attach(&self, seg.fd, seg.length, 0x1234, &peer));
    uint8_t *q = static_cast<uint8_t *>(peer.address);
    EXPECT_EQ(0, memcmp(q, m, len));
    q[12 * kPage] = 0x77;
    EXPECT_EQ(0x77, m[12 * kPage]);
    m[13 * kPage] = 0x88;
    EXPECT_EQ(0x88, q[13 * kPage]);

    axon_mem_unshare(&seg);
    EXPECT_FALSE(is_segment(m)) << maps_line(m);
    EXPECT_EQ(-1, axon_test_check(m, 5 * kPage, 3)) << "contents lost by the move back";
    EXPECT_EQ(0x42, m[9 * kPage + 7]);
    EXPECT_EQ(0x77, m[12 * kPage]);
    EXPECT_EQ(0x88, m[13 * kPage]);
    q[14 * kPage] = 0x99;   /* the peer's orphaned mapping: ours is private now */
    EXPECT_EQ(0, m[14 * kPage]);
    axon_mem_seg_detach(&peer);
    munmap(m, len);
}

/* Anonymous memory (malloc's kind) is not program data: its partial pages stay. */
TEST(ShmMemShare, OnlyWholePagesMove)
{
    uint8_t *m = map_anon(6 * kPage);
    ASSERT_NE(nullptr, m);
    axon_test_fill(m, 6 * kPage, 4);

    axon_mem_seg_t seg;
    ASSERT_EQ(AXON_OK, axon_mem_share(m + 100, 5 * kPage - 150, 7, &seg));
    EXPECT_EQ(m + kPage, seg.address);
    EXPECT_EQ(3 * kPage, seg.length) << "pages 1..3 (0 and 4 are partial)";
    EXPECT_FALSE(is_segment(m)) << "the first, partial page moved";
    EXPECT_FALSE(is_segment(m + 4 * kPage)) << "the last, partial page moved";
    EXPECT_TRUE(is_segment(m + kPage));
    EXPECT_EQ(-1, axon_test_check(m, 6 * kPage, 4));
    axon_mem_unshare(&seg);
    EXPECT_EQ(-1, axon_test_check(m, 6 * kPage, 4));
    munmap(m, 6 * kPage);
}

/* Program data: four pages of this program's .bss, with variables on either side of a
 * registered range whose ends lie inside the first and the last page. */
alignas(4096) uint8_t g_program_pages[4 * 4096];

TEST(ShmMemShare, PartialPagesOfProgramDataMoveToo)
{
    uint8_t *m = g_program_pages;
    axon_test_fill(m, 4 * kPage, 21);

    axon_mem_seg_t seg;
    ASSERT_EQ(AXON_OK, axon_mem_share(m + 100, 3 * kPage - 200, 14, &seg));
    EXPECT_EQ(m, seg.address) << "the partial first page of program data stayed";
    EXPECT_EQ(3 * kPage, seg.length) << "the partial last page of program data stayed";
    EXPECT_TRUE(is_segment(m)) << maps_line(m);
    EXPECT_TRUE(is_segment(m + 2 * kPage)) << maps_line(m + 2 * kPage);
    EXPECT_FALSE(is_segment(m + 3 * kPage)) << "a page outside the range moved";
    EXPECT_EQ(-1, axon_test_check(m, 4 * kPage, 21)) << "the variables around it were lost";

    /* The variables beside the range stay the program's, and read and write as before. */
    m[10]                = 0x31;
    m[3 * kPage - 10]    = 0x32;
    axon_proc_t self;
    axon_proc_self(&self);
    axon_mem_seg_t peer;
    ASSERT_EQ(AXON_OK, axon_mem_seg_attach(&self, seg.fd, seg.length, 14, &peer));
    uint8_t *q = static_cast<uint8_t *>(peer.address);
    EXPECT_EQ(0x31, q[10]);
    q[100] = 0x33;   /* the range's first byte and last byte, as a peer writes them */
    q[3 * kPage - 101] = 0x34;
    EXPECT_EQ(0x33, m[100]);
    EXPECT_EQ(0x34, m[3 * kPage - 101]);

    axon_mem_unshare(&seg);
    EXPECT_FALSE(is_segment(m)) << maps_line(m);
    EXPECT_EQ(0x31, m[10]);
    EXPECT_EQ(0x32, m[3 * kPage - 10]);
    EXPECT_EQ(0x33, m[100]);
    EXPECT_EQ(0x34, m[3 * kPage - 101]);
    m[10] = 0x35;   /* private again */
    EXPECT_EQ(0x31, q[10]);
    axon_mem_seg_detach(&peer);
}

TEST(ShmMemShare, RefusesWhatMustNotMoveAndChangesNothing)
{
    axon_mem_seg_t seg;
    uint8_t       *m = map_anon(4 * kPage);
    ASSERT_NE(nullptr, m);
    axon_test_fill(m, 4 * kPage, 5);

    EXPECT_EQ(AXON_ERR_UNSUPPORTED, axon_mem_share(m + 1, kPage, 1, &seg)) << "no whole page";

    uint8_t *shared = map_anon(2 * kPage, MAP_SHARED);   /* another library's segment */
    ASSERT_NE(nullptr, shared);
    EXPECT_EQ(AXON_ERR_UNSUPPORTED, axon_mem_share(shared, 2 * kPage, 1, &seg)) << "shared";
    munmap(shared, 2 * kPage);

    ASSERT_EQ(0, mprotect(m + 2 * kPage, kPage, PROT_READ));
    EXPECT_EQ(AXON_ERR_UNSUPPORTED, axon_mem_share(m, 4 * kPage, 1, &seg)) << "read-only page";
    ASSERT_EQ(0, mprotect(m + 2 * kPage, kPage, PROT_READ | PROT_WRITE));

    ASSERT_EQ(0, munmap(m + kPage, kPage));
    EXPECT_EQ(AXON_ERR_UNSUPPORTED, axon_mem_share(m, 4 * kPage, 1, &seg)) << "a hole";
    EXPECT_FALSE(is_segment(m));
    EXPECT_EQ(-1, axon_test_check(m, kPage, 5));
    EXPECT_FALSE(is_segment(m + 2 * kPage));
    munmap(m, 4 * kPage);
}

/* Pages shared already (an overlapping registration) stay in their segment. */
TEST(ShmMemShare, SharedPagesAreNotMovedTwice)
{
    uint8_t *m = map_anon(8 * kPage);
    ASSERT_NE(nullptr, m);
    axon_test_fill(m, 8 * kPage, 8);
    axon_mem_seg_t seg, again;
    ASSERT_EQ(AXON_OK, axon_mem_share(m, 8 * kPage, 12, &seg));
    EXPECT_EQ(AXON_ERR_UNSUPPORTED, axon_mem_share(m + 2 * kPage, 2 * kPage, 13, &again));
    m[3 * kPage] = 0x5a;   /* still the first segment's page */
    axon_proc_t self;
    axon_proc_self(&self);
    axon_mem_seg_t peer;
    ASSERT_EQ(AXON_OK, axon_mem_seg_attach(&self, seg.fd, seg.length, 12, &peer));
    EXPECT_EQ(0x5a, static_cast<uint8_t *>(peer.address)[3 * kPage]);
    axon_mem_seg_detach(&peer);
    axon_mem_unshare(&seg);
    munmap(m, 8 * kPage);
}

/* An untouched heap of 64 MiB: the segment holds only the page written. */
TEST(ShmMemShare, ZeroPagesAreNotCopied)
{
    const size_t len = 64u << 20;
    uint8_t     *m   = map_anon(len);
    ASSERT_NE(nullptr, m);
    m[len / 2] = 1;

    axon_mem_seg_t seg;
    ASSERT_EQ(AXON_OK, axon_mem_share(m, len, 9, &seg));
    struct stat st;
    ASSERT_EQ(0, fstat(seg.fd, &st));
    EXPECT_LT((size_t)st.st_blocks * 512, (size_t)1 << 20) << "zero pages were copied";
    EXPECT_EQ(1, m[len / 2]);
    axon_mem_unshare(&seg);
    EXPECT_EQ(1, m[len / 2]);
    munmap(m, len);
}

/* Pages of anonymous memory never touched are not even read: sharing an untouched heap
 * of 64 MiB (16 384 pages) faults in a few pages, not all of them; the pages that
 * were written keep their contents. */
TEST(ShmMemShare, UntouchedPagesAreNotRead)
{
    const size_t len = 64u << 20;
    uint8_t     *m   = map_anon(len);
    ASSERT_NE(nullptr, m);
    m[0]             = 7;
    m[len / 2 + 100] = 8;
    m[len - 1]       = 9;

    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    axon_mem_seg_t seg;
    ASSERT_EQ(AXON_OK, axon_mem_share(m, len, 10, &seg));
    getrusage(RUSAGE_SELF, &after);
    /* Reading every page would fault each (16 384); under valgrind its own work adds
     * about 4 000 faults, so the bound is half the pages. */
    EXPECT_LT(after.ru_minflt - before.ru_minflt, (long)(len / kPage / 2))
        << "page faults while sharing";
    EXPECT_EQ(7, m[0]);
    EXPECT_EQ(8, m[len / 2 + 100]);
    EXPECT_EQ(9, m[len - 1]);
    EXPECT_EQ(0, m[len / 4]);
    axon_mem_unshare(&seg);
    EXPECT_EQ(8, m[len / 2 + 100]);
    munmap(m, len);
}

/* The caller replaced the pages before unsharing: they are left as they are. */
TEST(ShmMemShare, UnshareLeavesReplacedPagesAlone)
{
    uint8_t *m = map_anon(4 * kPage);
    ASSERT_NE(nullptr, m);
    axon_mem_seg_t seg;
    ASSERT_EQ(AXON_OK, axon_mem_share(m, 4 * kPage, 11, &seg));
    void *again = mmap(m, 4 * kPage, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    ASSERT_EQ((void *)m, again);
    axon_test_fill(m, 4 * kPage, 6);
    axon_mem_unshare(&seg);
    EXPECT_EQ(-1, axon_test_check(m, 4 * kPage, 6)) << "unshare wrote over the caller's pages";
    munmap(m, 4 * kPage);
}

}  // namespace
