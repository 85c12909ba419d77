/*
 * shm's memory segments (components/shm/shm_mem_seg.h), the memory
 * AXON_MEM_MAP_ALLOCATE gives peers on the host to map: zeroed and aligned,
 * writes seen both ways once attached, and attaches refused (wrong fd,
 * token, length or owner; a dead owner) without leaking fds or mappings.
 * Every test bounds its time and reaps its children.
 */
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "harness.h"
#include "log_capture.h"
extern "C" {
#include "amo_cpu.h"
#include "log.h"
#include "shm_mem_seg.h"
}

namespace {

const double kChildTimeout = 60.0;

/* An 8-byte ADD of value, not fetching: what the header's lock table serves. */
axon_amo_args_t add8_args(uint64_t value)
{
    axon_amo_args_t args;

    memset(&args, 0, sizeof(args));
    args.op       = AXON_AMO_ADD;
    args.size     = 8;
    args.value[0] = value;
    return args;
}

struct SegKey {
    axon_proc_t owner;
    int32_t     fd;
    uint64_t    length;
    uint64_t    token;
};

SegKey key_of(const axon_mem_seg_t &seg)
{
    SegKey key;

    memset(&key, 0, sizeof(key));
    axon_proc_self(&key.owner);
    key.fd     = seg.fd;
    key.length = seg.length;
    key.token  = seg.token;
    return key;
}

unsigned count_fds()
{
    unsigned n = 0;
    DIR     *dir = opendir("/proc/self/fd");

    if (dir == NULL) {
        return 0;
    }
    while (readdir(dir) != NULL) {
        ++n;
    }
    closedir(dir);
    return n;
}

/* Mappings of Axon segments in /proc/self/maps (other mappings come and go:
 * malloc, sanitizers). */
unsigned count_seg_maps()
{
    std::ifstream in("/proc/self/maps");
    std::string   line;
    unsigned      n = 0;

    while (std::getline(in, line)) {
        n += line.find("memfd:axon-mem") != std::string::npos;
    }
    return n;
}

TEST(ShmMemSeg, AllocZeroedAligned)
{
    Watchdog       dog(30);
    axon_mem_seg_t seg;
    long           page = sysconf(_SC_PAGESIZE);

    ASSERT_EQ(AXON_OK, axon_mem_seg_alloc(10000, 7, &seg));
    EXPECT_GE(seg.fd, 0);
    EXPECT_EQ(10000u, seg.length);
    EXPECT_EQ(7u, seg.token);
    EXPECT_EQ(0u, (uintptr_t)seg.address % page);
    EXPECT_EQ(0u, seg.map_length % page);
    EXPECT_GE((uint8_t*)seg.base + seg.map_length, (uint8_t*)seg.address + seg.length);
    size_t rounded = (10000 + page - 1) / page * page;
    for (size_t i = 0; i < rounded; ++i) {
        ASSERT_EQ(0, ((uint8_t*)seg.address)[i]) << i;
    }
    memset(seg.address, 0x5a, rounded);   /* all of it is usable */
    for (unsigned i = 0; i < AXON_AMO_LOCKS; ++i) {
        EXPECT_EQ(0u, seg.locks->lock[i].word);
    }
    EXPECT_GE((uint8_t*)seg.locks, (uint8_t*)seg.base);
    EXPECT_LE((uint8_t*)(seg.locks + 1), (uint8_t*)seg.address);
    EXPECT_EQ(FD_CLOEXEC, fcntl(seg.fd, F_GETFD) & FD_CLOEXEC);
    axon_mem_seg_free(&seg);
    EXPECT_EQ(-1, seg.fd);
    axon_mem_seg_free(&seg);   /* twice: nothing */

    LogCapture log;
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_mem_seg_alloc(0, 7, &seg));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_mem_seg_alloc(SIZE_MAX, 7, &seg));
    EXPECT_EQ(-1, seg.fd);
}

/* The child maps the parent's segment: reads the parent's bytes, writes its own, adds. */
int peer_sees_writes(int fd, void *arg)
{
    const SegKey  *key = (const SegKey*)arg;
    axon_mem_seg_t seg;

    if (axon_mem_seg_attach(&key->owner, key->fd, key->length, key->token, &seg) != AXON_OK) {
        return 2;
    }
    if (seg.fd != -1) {
        return 3;
    }
    uint8_t *p = (uint8_t*)seg.address;
    for (size_t i = 0; i < key->length / 2; ++i) {
        if (p[i] != axon_test_pattern_byte(1, i)) {
            return 4;
        }
    }
    axon_test_fill(p + key->length / 2, key->length / 2, 2);

    axon_amo_args_t args = add8_args(11);
    axon_amo_cpu_exec(seg.locks, 0, p, &args, NULL);

    if (axon_test_sync(fd) != 0) {     /* written: the parent checks ... */
        return 5;
    }
    if (axon_test_sync(fd) != 0) {     /* ... and writes again */
        return 6;
    }
    int ret = (p[8] == 0xee) ? 0 : 7;
    axon_mem_seg_detach(&seg);
    return ret;
}

TEST(ShmMemSegXproc, AttachSeesWritesBothWays)
{
    Watchdog         dog(60);
    axon_mem_seg_t   seg;
    axon_test_peer_t peer;
    const size_t     len = 64 * 1024;

    ASSERT_EQ(AXON_OK, axon_mem_seg_alloc(len, 0x77, &seg));
    axon_test_fill(seg.address, len / 2, 1);
    SegKey   key = key_of(seg);
    uint64_t before;
    memcpy(&before, seg.address, 8);

    ASSERT_EQ(0, axon_test_peer_spawn(&peer, peer_sees_writes, &key, kChildTimeout));
    ASSERT_EQ(0, axon_test_sync(peer.fd));
    uint8_t *p = (uint8_t*)seg.address;
    uint64_t after;
    memcpy(&after, p, 8);
    EXPECT_EQ(before + 11, after);
    bool same = true;
    for (size_t i = len / 2; i < len && same; ++i) {
        same = (p[i] == axon_test_pattern_byte(2, i - len / 2));
    }
    EXPECT_TRUE(same) << "the child's writes are not visible";
    p[8] = 0xee;
    ASSERT_EQ(0, axon_test_sync(peer.fd));
    EXPECT_EQ(0, axon_test_peer_wait(&peer, kChildTimeout));
    axon_mem_seg_free(&seg);
}

/* The child owns a segment: it sends the key and waits to be killed. */
int owner_child(int fd, void *arg)
{
    axon_mem_seg_t seg;

    if (axon_mem_seg_alloc(8192, 0x99, &seg) != AXON_OK) {
        return 2;
    }
    memset(seg.address, 0x3c, 8192);
    SegKey key = key_of(seg);
    if (axon_test_send_blob(fd, &key, sizeof(key)) != 0) {
        return 3;
    }
    for (;;) {
        pause();
    }
}

TEST(ShmMemSegXproc, RefusedAttachesAndNoLeaks)
{
    Watchdog         dog(60);
    LogCapture       log;
    axon_mem_seg_t   seg, peer_seg;
    axon_test_peer_t peer;
    void            *buf;
    size_t           len;

    /* A live owner in another process, for the dead-owner case at the end. */
    ASSERT_EQ(0, axon_test_peer_spawn(&peer, owner_child, NULL, kChildTimeout));
    ASSERT_EQ(0, axon_test_recv_blob(peer.fd, &buf, &len));
    ASSERT_EQ(sizeof(SegKey), len);
    SegKey child_key;
    memcpy(&child_key, buf, sizeof(child_key));
    free(buf);

    unsigned fds0 = count_fds(), segs0 = count_seg_maps();

    for (unsigned round = 0; round < 20; ++round) {
        ASSERT_EQ(AXON_OK, axon_mem_seg_alloc(3 * 4096, 0x55, &seg));
        SegKey key = key_of(seg);

        ASSERT_EQ(AXON_OK, axon_mem_seg_attach(&key.owner, key.fd, key.length, key.token,
                                               &peer_seg));
        EXPECT_NE(seg.address, peer_seg.address);
        axon_mem_seg_detach(&peer_seg);

        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS,   /* wrong token */
                  axon_mem_seg_attach(&key.owner, key.fd, key.length, key.token + 1, &peer_seg));
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS,   /* wrong length, same pages */
                  axon_mem_seg_attach(&key.owner, key.fd, key.length - 1, key.token, &peer_seg));
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS,   /* wrong length, other pages */
                  axon_mem_seg_attach(&key.owner, key.fd, key.length * 2, key.token, &peer_seg));
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS,   /* no length */
                  axon_mem_seg_attach(&key.owner, key.fd, 0, key.token, &peer_seg));
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS,   /* no such fd */
                  axon_mem_seg_attach(&key.owner, 1000000, key.length, key.token, &peer_seg));
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS,   /* a negative fd */
                  axon_mem_seg_attach(&key.owner, -1, key.length, key.token, &peer_seg));
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS,   /* an fd that is not a memfd (stdin, a pipe) */
                  axon_mem_seg_attach(&key.owner, 0, key.length, key.token, &peer_seg));
        int pipefd[2];
        ASSERT_EQ(0, pipe(pipefd));
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS,
                  axon_mem_seg_attach(&key.owner, pipefd[0], key.length, key.token, &peer_seg));
        close(pipefd[0]);
        close(pipefd[1]);
        int other = memfd_create("axon-mem", MFD_CLOEXEC);   /* our name, not our header */
        ASSERT_GE(other, 0);
        ASSERT_EQ(0, ftruncate(other, (off_t)seg.map_length));
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS,
                  axon_mem_seg_attach(&key.owner, other, key.length, key.token, &peer_seg));
        close(other);
        /* The child's segment named with our pid: not there, or not that one. */
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, axon_mem_seg_attach(&key.owner, child_key.fd,
                                                              child_key.length, child_key.token,
                                                              &peer_seg));
        /* Our segment, claimed to be the child's. */
        EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, axon_mem_seg_attach(&child_key.owner, key.fd,
                                                              key.length, key.token, &peer_seg));
        EXPECT_EQ(-1, peer_seg.fd);
        EXPECT_EQ(nullptr, peer_seg.base);
        axon_mem_seg_free(&seg);
    }

    EXPECT_EQ(fds0, count_fds()) << "fds leaked";
    EXPECT_EQ(segs0, count_seg_maps()) << "segment mappings leaked";

    /* The child's segment, attached while it lives, survives its death. */
    ASSERT_EQ(AXON_OK, axon_mem_seg_attach(&child_key.owner, child_key.fd, child_key.length,
                                           child_key.token, &peer_seg));
    EXPECT_EQ(0x3c, ((uint8_t*)peer_seg.address)[8191]);
    pid_t pid = axon_test_peer_crash(&peer);
    EXPECT_GT(pid, 0);
    EXPECT_EQ(0x3c, ((uint8_t*)peer_seg.address)[100]);
    axon_mem_seg_detach(&peer_seg);
    /* ... but a new attach to a dead owner is refused. */
    axon_mem_seg_t dead;
    EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, axon_mem_seg_attach(&child_key.owner, child_key.fd,
                                                          child_key.length, child_key.token,
                                                          &dead));
    /* Also when its identity cannot be compared (only the pid known). */
    axon_proc_t bare;
    memset(&bare, 0, sizeof(bare));
    bare.pid = child_key.owner.pid;
    EXPECT_EQ(AXON_ERR_REMOTE_ACCESS, axon_mem_seg_attach(&bare, child_key.fd, child_key.length,
                                                          child_key.token, &dead));

    EXPECT_EQ(fds0 - 1, count_fds()) << "fds leaked";   /* the peer's socket closed */
    EXPECT_EQ(segs0, count_seg_maps()) << "segment mappings leaked";
}

}  // namespace
