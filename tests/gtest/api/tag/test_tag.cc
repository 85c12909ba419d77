/*
 * Tag messaging over every transport, with two roles: rank 0 and rank 1
 * (tag_env.h runs them: self in one process, shm, tcp, rc and ud in two,
 * tcp_netns in two network namespaces). Variants add a rendezvous threshold of 16 KiB,
 * so sizes on both sides of it are exercised deterministically, and CMA off,
 * so rendezvous data is pipelined through the shm ring.
 */
#include "tag_env.h"

namespace {

class Tag : public ::testing::TestWithParam<TransportParam> {
protected:
    /* Run role0 as rank 0 and role1 as rank 1 over the transport of the parameter. */
    void Run(Role role0, Role role1, std::vector<axon_config_kv_t> config = {})
    {
        run_roles(GetParam(), role0, role1, config);
    }
};

const axon_tag_t kTagPing = 0x10;
const axon_tag_t kTagPong = 0x20;

/* ---------------------------------------------------------------- basic */

TEST_P(Tag, PingPongSmall)
{
    const int kIters = 200;

    Run([&](Env &env) {
        std::vector<uint8_t> out(64), in(64);
        for (int i = 0; i < kIters; ++i) {
            size_t len = 1 + (i % 64);
            axon_tag_recv_info_t info;
            fill_msg(out.data(), len, i);
            ASSERT_EQ(AXON_OK, env.send(out.data(), len, kTagPing)) << i;
            ASSERT_EQ(AXON_OK, env.recv(in.data(), in.size(), kTagPong, AXON_TAG_MASK_FULL,
                                        &info)) << i;
            ASSERT_EQ(len, info.length);
            ASSERT_EQ(kTagPong, info.sender_tag);
            ASSERT_EQ(0, memcmp(out.data(), in.data(), len)) << i;
        }
    }, [&](Env &env) {
        std::vector<uint8_t> buf(64);
        for (int i = 0; i < kIters; ++i) {
            axon_tag_recv_info_t info;
            ASSERT_EQ(AXON_OK, env.recv(buf.data(), buf.size(), kTagPing, AXON_TAG_MASK_FULL,
                                        &info)) << i;
            ASSERT_EQ(1 + (size_t)(i % 64), info.length);
            ASSERT_EQ("", check_msg(buf.data(), info.length, i));
            ASSERT_EQ(AXON_OK, env.send(buf.data(), info.length, kTagPong)) << i;
        }
    });
}

TEST_P(Tag, ZeroLength)
{
    Run([&](Env &env) {
        for (int i = 0; i < 20; ++i) {
            axon_tag_recv_info_t info = {0xdead, 12345};
            uint8_t              buf[16];
            memset(buf, 0xEE, sizeof(buf));
            /* Half into no buffer at all, half into a real one that must stay untouched. */
            if (i % 2) {
                ASSERT_EQ(AXON_OK, env.recv(buf, sizeof(buf), i, AXON_TAG_MASK_FULL, &info));
            } else {
                ASSERT_EQ(AXON_OK, env.recv(NULL, 0, i, AXON_TAG_MASK_FULL, &info));
            }
            EXPECT_EQ(0u, info.length) << i;
            EXPECT_EQ((axon_tag_t)i, info.sender_tag) << i;
            for (size_t j = 0; j < sizeof(buf); ++j) {
                ASSERT_EQ(0xEE, buf[j]) << "a 0-byte message wrote into the buffer";
            }
        }
        /* A 0-byte receive buffer takes a 0-byte message, and truncates a longer one. */
        axon_tag_recv_info_t info;
        ASSERT_TRUE(env.barrier());
        EXPECT_EQ(AXON_ERR_MSG_TRUNCATED, env.recv(NULL, 0, 100, AXON_TAG_MASK_FULL, &info));
        EXPECT_EQ(5u, info.length);
    }, [&](Env &env) {
        uint8_t dummy = 0;
        for (int i = 0; i < 20; ++i) {
            ASSERT_EQ(AXON_OK, env.send((i % 3) ? &dummy : NULL, 0, i)) << i;
        }
        ASSERT_TRUE(env.barrier());
        ASSERT_EQ(AXON_OK, env.send("hello", 5, 100));
    });
}

/*
 * One large message of len bytes, twice: once with the receive posted before
 * it, once after it arrived. The sender posts before the barrier and waits
 * after it, as a rendezvous send completes only once the receive is posted.
 */
void large_receiver(Env &env, size_t len)
{
    for (int round = 0; round < 2; ++round) {
        GuardedBuf           buf(len);
        axon_tag_recv_info_t info;
        axon_request_h       req    = nullptr;
        axon_request_param_t param  = {};
        param.recv_info = &info;
        if (round == 1) {
            ASSERT_TRUE(env.barrier());
            axon_test_progress_for(env.worker, 0.01);
        }
        axon_status_t status = axon_tag_recv_nb(env.worker, buf.data(), len, 7 + round,
                                                AXON_TAG_MASK_FULL, &param, &req);
        if (round == 0) {
            ASSERT_TRUE(env.barrier());
        }
        ASSERT_EQ(AXON_OK, env.wait(status, req, &info)) << "round " << round;
        EXPECT_EQ(len, info.length);
        EXPECT_EQ(7u + round, info.sender_tag);
        EXPECT_EQ("", check_msg(buf.data(), len, round)) << "round " << round;
        EXPECT_TRUE(buf.guard_intact());
    }
}

void large_sender(Env &env, size_t len)
{
    std::vector<uint8_t> out(len);
    for (int round = 0; round < 2; ++round) {
        axon_request_h req = nullptr;
        fill_msg(out.data(), len, round);
        if (round == 0) {
            ASSERT_TRUE(env.barrier());
        }
        axon_status_t status = axon_tag_send_nb(env.ep(), out.data(), len, 7 + round, NULL,
                                                &req);
        if (round == 1) {
            ASSERT_TRUE(env.barrier());
        }
        ASSERT_EQ(AXON_OK, env.wait(status, req, NULL)) << "round " << round;
    }
}

TEST_P(Tag, LargeOneMiB)
{
    Run([&](Env &env) { large_receiver(env, 1 << 20); },
        [&](Env &env) { large_sender(env, 1 << 20); });
}

/* Slow: a long transfer, not for the sanitizer passes (tests/README.md). */
class TagSlow : public Tag {};

TEST_P(TagSlow, Large64MiB)
{
    /* Odd length: no transport gets whole pages only. */
    const size_t kLen = (64u << 20) + 13;

    Run([&](Env &env) { large_receiver(env, kLen); },
        [&](Env &env) { large_sender(env, kLen); });
}

/* Sizes 1..64 KiB, dense where a protocol or a cell changes. */
std::vector<size_t> sweep_sizes(size_t short_max)
{
    std::vector<size_t> sizes;
    auto add = [&](size_t s) {
        if ((s >= 1) && (s <= 65536 + 64)) {
            sizes.push_back(s);
        }
    };
    for (size_t s = 1; s <= 300; ++s) {
        add(s);
    }
    for (size_t s = short_max - 8; s <= short_max + 8; ++s) {
        add(s);
    }
    /* An 8 KiB cell holds a bit less payload: sweep every size around it. */
    for (size_t s = 8192 - 96; s <= 8192 + 32; ++s) {
        add(s);
    }
    for (size_t s = 16384 - 96; s <= 16384 + 32; s += 4) {
        add(s);
    }
    for (size_t p = 512; p <= 65536; p *= 2) {
        add(p - 1);
        add(p);
        add(p + 1);
    }
    add(65536 + 64);
    return sizes;
}

TEST_P(Tag, SizeSweep)
{
    Run([&](Env &env) {
        uint64_t            short_max = env.bcast(0, 1);
        std::vector<size_t> sizes     = sweep_sizes(short_max);
        for (size_t i = 0; i < sizes.size(); ++i) {
            GuardedBuf           buf(sizes[i]);
            axon_tag_recv_info_t info;
            ASSERT_EQ(AXON_OK, env.recv(buf.data(), sizes[i], 3, AXON_TAG_MASK_FULL, &info))
                << "size " << sizes[i];
            ASSERT_EQ(sizes[i], info.length);
            ASSERT_EQ("", check_msg(buf.data(), sizes[i], i));
            ASSERT_TRUE(buf.guard_intact()) << "size " << sizes[i];
        }
    }, [&](Env &env) {
        axon_ep_attr_t attr;
        ASSERT_EQ(AXON_OK, axon_ep_query(env.ep(), &attr));
        EXPECT_GT(attr.eager_short_max, 0u);
        EXPECT_LT(attr.eager_short_max, 65536u);
        std::vector<size_t>  sizes = sweep_sizes(env.bcast(attr.eager_short_max, 1));
        std::vector<uint8_t> out(65536 + 64);
        for (size_t i = 0; i < sizes.size(); ++i) {
            fill_msg(out.data(), sizes[i], i);
            ASSERT_EQ(AXON_OK, env.send(out.data(), sizes[i], 3)) << "size " << sizes[i];
        }
    });
}

/* ---------------------------------------------------------------- ordering */

size_t mixed_size(int i)
{
    if (i % 10 == 0) {
        return 20000 + 37 * (i % 50);  /* several fragments */
    }
    if (i % 3 == 0) {
        return 1000 + 97 * (i % 90);   /* one bcopy message */
    }
    return 8 + (i % 57);                /* short */
}


TEST_P(Tag, NonOvertakingSameTag)
{
    const int kCount = 1000;

    Run([&](Env &env) {
        std::vector<uint8_t> buf(64 * 1024);
        for (int i = 0; i < kCount; ++i) {
            axon_tag_recv_info_t info;
            ASSERT_EQ(AXON_OK, env.recv(buf.data(), buf.size(), 42, AXON_TAG_MASK_FULL, &info))
                << i;
            ASSERT_EQ(mixed_size(i), info.length) << i;
            ASSERT_EQ("", check_msg(buf.data(), info.length, i));
        }
    }, [&](Env &env) {
        send_all(env, kCount, mixed_size, [](int) { return (axon_tag_t)42; });
    });
}

TEST_P(Tag, UnexpectedThenPosted)
{
    const int kCount = 100;
    auto tag = [](int i) { return (axon_tag_t)(0x500 + i % 3); };

    Run([&](Env &env) {
        /* Everything has been sent (and drained while we waited) before we post. */
        ASSERT_TRUE(env.barrier());
        axon_test_progress_for(env.worker, 0.05);
        /* One tag after the other: each tag's messages in send order. */
        for (int t = 0; t < 3; ++t) {
            for (int i = t; i < kCount; i += 3) {
                std::vector<uint8_t> buf(mixed_size(i));
                axon_tag_recv_info_t info;
                ASSERT_EQ(AXON_OK, env.recv(buf.data(), buf.size(), tag(i), AXON_TAG_MASK_FULL,
                                            &info)) << i;
                ASSERT_EQ(tag(i), info.sender_tag);
                ASSERT_EQ(mixed_size(i), info.length);
                ASSERT_EQ("", check_msg(buf.data(), info.length, i));
            }
        }
        /* Nothing is left over: a wildcard receive stays pending... */
        uint8_t              byte = 0;
        CbRecord             rec;
        axon_request_h       req   = nullptr;
        axon_tag_recv_info_t info;
        axon_request_param_t param = {};
        param.recv_info = &info;
        param.cb.recv   = recv_cb;
        param.user_data = &rec;
        axon_status_t status = axon_tag_recv_nb(env.worker, &byte, 1, 0, 0, &param, &req);
        ASSERT_EQ(AXON_INPROGRESS, status) << "an extra message was delivered";
        axon_request_free(req);
        /* ...and, though freed, takes the message the sender adds for it. */
        ASSERT_TRUE(env.barrier());
        EXPECT_TRUE(env.progress_until([&] { return rec.calls > 0; }));
        EXPECT_EQ(1, rec.calls);
        EXPECT_EQ(AXON_OK, rec.status);
        EXPECT_EQ(0x999u, rec.tag);
        EXPECT_EQ(1u, rec.length);
        EXPECT_EQ(0x5A, byte);
    }, [&](Env &env) {
        SendBatch batch;
        for (int i = 0; i < kCount; ++i) {
            batch.post(env, mixed_size(i), i, tag(i));
        }
        ASSERT_TRUE(env.barrier());
        batch.wait(env);
        ASSERT_TRUE(env.barrier());
        uint8_t byte = 0x5A;
        ASSERT_EQ(AXON_OK, env.send(&byte, 1, 0x999));
    });
}

TEST_P(Tag, ExpectedPath)
{
    const int kCount = 60;

    struct Slot {
        int                  calls = 0;
        axon_status_t        status = AXON_INPROGRESS;
        axon_tag_recv_info_t info  = {0, 0};
        std::vector<uint8_t> buf;
    };

    Run([&](Env &env) {
        std::vector<Slot> slots(kCount);
        int               done = 0;
        auto cb = [](axon_request_h, axon_status_t status, const axon_tag_recv_info_t *info,
                     void *arg) {
            Slot *slot = static_cast<Slot *>(arg);
            slot->calls++;
            slot->status = status;
            slot->info   = *info;
        };
        for (int i = 0; i < kCount; ++i) {
            axon_request_param_t param = {};
            axon_request_h       req   = nullptr;
            /* Posted in reverse: matching is by tag, not by post order. */
            int j = kCount - 1 - i;
            slots[j].buf.resize(mixed_size(j));
            param.cb.recv   = cb;
            param.user_data = &slots[j];
            axon_status_t status = axon_tag_recv_nb(env.worker, slots[j].buf.data(),
                                                    slots[j].buf.size(), 1000 + j,
                                                    AXON_TAG_MASK_FULL, &param, &req);
            ASSERT_EQ(AXON_INPROGRESS, status) << "nothing was sent yet";
            axon_request_free(req);
        }
        ASSERT_TRUE(env.barrier());
        env.progress_until([&] {
            done = 0;
            for (auto &s : slots) {
                done += (s.calls > 0);
            }
            return done == kCount;
        });
        for (int i = 0; i < kCount; ++i) {
            ASSERT_EQ(1, slots[i].calls) << i;
            EXPECT_EQ(AXON_OK, slots[i].status) << i;
            EXPECT_EQ((axon_tag_t)(1000 + i), slots[i].info.sender_tag);
            EXPECT_EQ(mixed_size(i), slots[i].info.length);
            EXPECT_EQ("", check_msg(slots[i].buf.data(), slots[i].buf.size(), i));
        }
    }, [&](Env &env) {
        ASSERT_TRUE(env.barrier());
        send_all(env, kCount, mixed_size, [](int i) { return (axon_tag_t)(1000 + i); });
    });
}

TEST_P(Tag, InterleavedTagsPostedOutOfOrder)
{
    const int kPerTag = 50;
    const int kTags   = 4;
    auto tag = [](int i) { return (axon_tag_t)(0xABC0000000000000ull | (i % kTags)); };

    Run([&](Env &env) {
        /* Tags 3,2 posted before the messages, tags 1,0 after: both queues at once. */
        std::vector<std::vector<uint8_t>> bufs(kPerTag * kTags);
        std::vector<axon_request_h>       reqs(kPerTag * kTags, nullptr);
        std::vector<axon_status_t>        st(kPerTag * kTags);
        std::vector<axon_tag_recv_info_t> infos(kPerTag * kTags);
        auto post = [&](int t) {
            for (int k = 0; k < kPerTag; ++k) {
                int                  i     = k * kTags + t;
                axon_request_param_t param = {};
                bufs[i].resize(mixed_size(i));
                param.recv_info = &infos[i];
                st[i] = axon_tag_recv_nb(env.worker, bufs[i].data(), bufs[i].size(), tag(t),
                                         AXON_TAG_MASK_FULL, &param, &reqs[i]);
                ASSERT_TRUE(st[i] == AXON_OK || st[i] == AXON_INPROGRESS) << i;
            }
        };
        post(3);
        post(2);
        ASSERT_TRUE(env.barrier());
        ASSERT_TRUE(env.barrier());  /* all sent */
        post(1);
        post(0);
        for (int i = 0; i < kPerTag * kTags; ++i) {
            ASSERT_EQ(AXON_OK, env.wait(st[i], reqs[i], &infos[i])) << i;
            EXPECT_EQ(tag(i), infos[i].sender_tag) << i;
            EXPECT_EQ(mixed_size(i), infos[i].length) << i;
            EXPECT_EQ("", check_msg(bufs[i].data(), bufs[i].size(), i));
        }
    }, [&](Env &env) {
        SendBatch batch;
        ASSERT_TRUE(env.barrier());
        for (int i = 0; i < kPerTag * kTags; ++i) {
            batch.post(env, mixed_size(i), i, tag(i));
        }
        ASSERT_TRUE(env.barrier());
        batch.wait(env);
    });
}

/* ---------------------------------------------------------------- rendezvous */

/* The threshold the _rndv variants set: sizes around it take both protocols. */
const size_t kRndvThresh = 16384;

std::vector<size_t> straddle_sizes()
{
    std::vector<size_t> sizes;

    for (size_t s = kRndvThresh - 3; s <= kRndvThresh + 3; ++s) {
        sizes.push_back(s);
    }
    for (size_t s : {kRndvThresh / 2, kRndvThresh - 64, kRndvThresh + 64, 2 * kRndvThresh + 3,
                     (size_t)65536, (size_t)262144 + 5, ((size_t)1 << 20) - 1,
                     ((size_t)4 << 20) + 1}) {
        sizes.push_back(s);
    }
    return sizes;
}

TEST_P(Tag, RndvThresholdStraddle)
{
    const axon_tag_t kTag = 0x700;
    const size_t     kPad = 100;  /* receive buffers larger than the message */

    Run([&](Env &env) {
        std::vector<size_t> sizes = straddle_sizes();
        size_t              count = sizes.size();

        /* Expected: every receive posted before the messages, all with one tag. */
        std::vector<GuardedBuf>           bufs;
        std::vector<axon_request_h>       reqs(count, nullptr);
        std::vector<axon_status_t>        st(count);
        std::vector<axon_tag_recv_info_t> infos(count);
        for (size_t i = 0; i < count; ++i) {
            bufs.emplace_back(sizes[i] + kPad);
        }
        for (size_t i = 0; i < count; ++i) {
            axon_request_param_t param = {};
            param.flags = AXON_REQ_FLAG_NO_IMM_CMPL;
            st[i] = axon_tag_recv_nb(env.worker, bufs[i].data(), bufs[i].size(), kTag,
                                     AXON_TAG_MASK_FULL, &param, &reqs[i]);
            ASSERT_EQ(AXON_INPROGRESS, st[i]) << i;
        }
        ASSERT_TRUE(env.barrier());
        for (size_t i = 0; i < count; ++i) {
            ASSERT_EQ(AXON_OK, env.wait(st[i], reqs[i], &infos[i])) << "size " << sizes[i];
            EXPECT_EQ(sizes[i], infos[i].length);
            EXPECT_EQ("", check_msg(bufs[i].data(), sizes[i], i));
            EXPECT_TRUE(bufs[i].intact_from(sizes[i]))
                << "size " << sizes[i] << ": written past the end of the message";
        }

        /* Unexpected: every message there before its receive. */
        ASSERT_TRUE(env.barrier());
        axon_test_progress_for(env.worker, 0.02);
        for (size_t i = 0; i < count; ++i) {
            GuardedBuf           buf(sizes[i]);
            axon_tag_recv_info_t info;
            ASSERT_EQ(AXON_OK, env.recv(buf.data(), sizes[i], kTag, AXON_TAG_MASK_FULL, &info))
                << "size " << sizes[i];
            EXPECT_EQ(sizes[i], info.length);
            EXPECT_EQ("", check_msg(buf.data(), sizes[i], 100 + i));
            EXPECT_TRUE(buf.guard_intact()) << "size " << sizes[i];
        }
    }, [&](Env &env) {
        std::vector<size_t> sizes = straddle_sizes();
        SendBatch           batch;

        ASSERT_TRUE(env.barrier());
        for (size_t i = 0; i < sizes.size(); ++i) {
            batch.post(env, sizes[i], i, kTag);
        }
        batch.wait(env);
        for (size_t i = 0; i < sizes.size(); ++i) {
            batch.post(env, sizes[i], 100 + i, kTag);
        }
        ASSERT_TRUE(env.barrier());
        batch.wait(env);
    });
}

/* Small, rendezvous on every transport, around the 16 KiB threshold, eager bcopy. */
size_t interleaved_size(int i)
{
    switch (i % 4) {
    case 0:  return 8 + i % 50;
    case 1:  return ((size_t)512 << 10) + (size_t)i * 8191;
    case 2:  return kRndvThresh - 2 + i % 5;
    default: return 5000 + 17 * i;
    }
}

/*
 * Eager and rendezvous messages with one tag match in send order, whether
 * the receive was posted first (some with a wildcard) or the message came
 * first: a rendezvous message is matched when its request-to-send arrives,
 * in line with the eager messages around it.
 */
TEST_P(Tag, EagerRndvInterleavedOrder)
{
    const int        kCount = 120;
    const axon_tag_t kTag   = 0x4242;
    const size_t     kPad   = 64;

    Run([&](Env &env) {
        std::vector<GuardedBuf>           bufs;
        std::vector<axon_request_h>       reqs(kCount, nullptr);
        std::vector<axon_status_t>        st(kCount);
        std::vector<axon_tag_recv_info_t> infos(kCount);
        auto post = [&](int i) {
            axon_request_param_t param = {};
            param.recv_info = &infos[i];
            /* Every third receive takes any tag: post order decides, not the queue. */
            st[i] = axon_tag_recv_nb(env.worker, bufs[i].data(), bufs[i].size(), kTag,
                                     (i % 3 == 0) ? 0 : AXON_TAG_MASK_FULL, &param, &reqs[i]);
            ASSERT_TRUE((st[i] == AXON_OK) || (st[i] == AXON_INPROGRESS)) << i;
        };
        for (int i = 0; i < kCount; ++i) {
            bufs.emplace_back(interleaved_size(i) + kPad);
        }
        for (int i = 0; i < kCount / 2; ++i) {
            post(i);
        }
        ASSERT_TRUE(env.barrier());
        axon_test_progress_for(env.worker, 0.02);
        for (int i = kCount / 2; i < kCount; ++i) {
            post(i);
        }
        for (int i = 0; i < kCount; ++i) {
            ASSERT_EQ(AXON_OK, env.wait(st[i], reqs[i], &infos[i])) << i;
            EXPECT_EQ(interleaved_size(i), infos[i].length) << "receive " << i;
            EXPECT_EQ("", check_msg(bufs[i].data(), infos[i].length, i)) << "receive " << i;
            EXPECT_TRUE(bufs[i].intact_from(interleaved_size(i))) << "receive " << i;
        }
    }, [&](Env &env) {
        SendBatch batch;
        ASSERT_TRUE(env.barrier());
        for (int i = 0; i < kCount; ++i) {
            batch.post(env, interleaved_size(i), i, kTag);
        }
        batch.wait(env);
    });
}

/* ---------------------------------------------------------------- wildcards */

TEST_P(Tag, WildcardReceives)
{
    const axon_tag_t tags[] = {0x1234000000000001ull, 0x1234000000000002ull,
                               0x9999000000000003ull, 0x5555000000000004ull,
                               0x1234000000000005ull};
    const int kCount = sizeof(tags) / sizeof(tags[0]);

    Run([&](Env &env) {
        uint8_t              buf[256];
        axon_tag_recv_info_t info;
        ASSERT_TRUE(env.barrier());

        /* Unexpected: mask 0 takes the oldest message, whatever its tag. */
        ASSERT_EQ(AXON_OK, env.recv(buf, sizeof(buf), 0x77, 0, &info));
        EXPECT_EQ(tags[0], info.sender_tag);
        EXPECT_EQ(10u, info.length);
        EXPECT_EQ("", check_msg(buf, info.length, 0));
        /* High bits only: skips the 0x1234 messages. */
        ASSERT_EQ(AXON_OK, env.recv(buf, sizeof(buf), 0x9999ffffffffffffull,
                                    0xffff000000000000ull, &info));
        EXPECT_EQ(tags[2], info.sender_tag);
        EXPECT_EQ(12u, info.length);
        EXPECT_EQ("", check_msg(buf, info.length, 2));
        /* Low bits only. */
        ASSERT_EQ(AXON_OK, env.recv(buf, sizeof(buf), 0x4, 0xff, &info));
        EXPECT_EQ(tags[3], info.sender_tag);
        EXPECT_EQ(13u, info.length);
        /* High bits again: the oldest of the two remaining 0x1234 messages. */
        ASSERT_EQ(AXON_OK, env.recv(buf, sizeof(buf), 0x1234000000000000ull,
                                    0xffff000000000000ull, &info));
        EXPECT_EQ(tags[1], info.sender_tag);
        EXPECT_EQ(11u, info.length);
        ASSERT_EQ(AXON_OK, env.recv(buf, sizeof(buf), tags[4], AXON_TAG_MASK_FULL, &info));
        EXPECT_EQ(tags[4], info.sender_tag);

        /*
         * Expected: a message matching a wildcard and a full-mask receive goes
         * to the one posted first.
         */
        uint8_t              b[4][64];
        axon_request_h       reqs[4];
        axon_status_t        st[4];
        axon_tag_recv_info_t infos[4];
        axon_request_param_t param = {};
        param.flags = AXON_REQ_FLAG_NO_IMM_CMPL;
        st[0] = axon_tag_recv_nb(env.worker, b[0], 64, 0, 0, &param, &reqs[0]);          /* any */
        st[1] = axon_tag_recv_nb(env.worker, b[1], 64, 5, AXON_TAG_MASK_FULL, &param,
                                 &reqs[1]);                                               /* 5 */
        st[2] = axon_tag_recv_nb(env.worker, b[2], 64, 6, AXON_TAG_MASK_FULL, &param,
                                 &reqs[2]);                                               /* 6 */
        st[3] = axon_tag_recv_nb(env.worker, b[3], 64, 0, 0xf0, &param, &reqs[3]);       /* x0y */
        ASSERT_TRUE(env.barrier());
        /* The sender sends tags 5, 6, 5, 0x203: 5 -> any, 6 -> [2], 5 -> [1], 0x203 -> [3]. */
        const axon_tag_t expect[4] = {5, 5, 6, 0x203};
        const size_t     lens[4]   = {1, 3, 2, 4};
        for (int i = 0; i < 4; ++i) {
            ASSERT_EQ(AXON_INPROGRESS, st[i]);
            ASSERT_EQ(AXON_OK, env.wait(st[i], reqs[i], &infos[i])) << i;
            EXPECT_EQ(expect[i], infos[i].sender_tag) << i;
            EXPECT_EQ(lens[i], infos[i].length) << i;
        }
    }, [&](Env &env) {
        uint8_t out[64];
        for (int i = 0; i < kCount; ++i) {
            fill_msg(out, 10 + i, i);
            ASSERT_EQ(AXON_OK, env.send(out, 10 + i, tags[i]));
        }
        ASSERT_TRUE(env.barrier());
        ASSERT_TRUE(env.barrier());
        ASSERT_EQ(AXON_OK, env.send(out, 1, 5));
        ASSERT_EQ(AXON_OK, env.send(out, 2, 6));
        ASSERT_EQ(AXON_OK, env.send(out, 3, 5));
        ASSERT_EQ(AXON_OK, env.send(out, 4, 0x203));
    });
}

/* ---------------------------------------------------------------- truncation */

struct TruncCase {
    size_t buf_len;
    size_t msg_len;
};

const TruncCase kTruncCases[] = {
    {1, 2}, {10, 11}, {100, 1000}, {0, 7}, {7, 8000}, {4000, 20000}, {30000, 100000},
};

/* Receive message i of kTruncCases (truncated), then its follow-up (intact). */
void recv_truncated(Env &env, int i, bool expected_path)
{
    const TruncCase     &c = kTruncCases[i];
    GuardedBuf           buf(c.buf_len);
    axon_tag_recv_info_t info = {0, 0};
    axon_request_param_t param = {};
    axon_request_h       req   = nullptr;

    param.flags     = AXON_REQ_FLAG_NO_IMM_CMPL;
    param.recv_info = &info;
    axon_status_t status = axon_tag_recv_nb(env.worker, c.buf_len ? buf.data() : NULL,
                                            c.buf_len, 200 + i, AXON_TAG_MASK_FULL, &param,
                                            &req);
    ASSERT_EQ(AXON_INPROGRESS, status) << "NO_IMM_CMPL must give a request";
    if (expected_path) {
        ASSERT_TRUE(env.barrier());
    }
    EXPECT_EQ(AXON_ERR_MSG_TRUNCATED, env.wait(status, req, &info)) << "case " << i;
    EXPECT_EQ(c.msg_len, info.length) << "case " << i;
    EXPECT_EQ((axon_tag_t)(200 + i), info.sender_tag);
    /* The prefix is the message's prefix; nothing past the buffer was written. */
    std::vector<uint8_t> full(c.msg_len);
    fill_msg(full.data(), c.msg_len, i);
    EXPECT_EQ(0, memcmp(full.data(), buf.data(), c.buf_len)) << "case " << i;
    EXPECT_TRUE(buf.guard_intact()) << "case " << i << ": overrun past the buffer";

    /* The rest of a truncated message must not leak into the next one. */
    std::vector<uint8_t> next(64);
    ASSERT_EQ(AXON_OK, env.recv(next.data(), next.size(), 300 + i, AXON_TAG_MASK_FULL, &info));
    EXPECT_EQ(33u, info.length);
    EXPECT_EQ("", check_msg(next.data(), 33, 1000 + i));
}

/* Post message i of kTruncCases and its follow-up (waited by the caller). */
void post_truncated(Env &env, int i, SendBatch &batch)
{
    batch.post(env, kTruncCases[i].msg_len, i, 200 + i);
    batch.post(env, 33, 1000 + i, 300 + i);
}

TEST_P(Tag, TruncationExpected)
{
    const int kCases = sizeof(kTruncCases) / sizeof(kTruncCases[0]);

    Run([&](Env &env) {
        for (int i = 0; i < kCases; ++i) {
            recv_truncated(env, i, true);
            ASSERT_TRUE(env.barrier());
        }
    }, [&](Env &env) {
        for (int i = 0; i < kCases; ++i) {
            SendBatch batch;
            ASSERT_TRUE(env.barrier());
            post_truncated(env, i, batch);
            batch.wait(env);
            ASSERT_TRUE(env.barrier());
        }
    });
}

TEST_P(Tag, TruncationUnexpected)
{
    const int kCases = sizeof(kTruncCases) / sizeof(kTruncCases[0]);

    Run([&](Env &env) {
        ASSERT_TRUE(env.barrier());
        axon_test_progress_for(env.worker, 0.02);
        for (int i = 0; i < kCases; ++i) {
            recv_truncated(env, i, false);
        }
        /* Without NO_IMM_CMPL: an error at once, or a request that fails the same way. */
        uint8_t              small[4];
        axon_tag_recv_info_t info  = {0, 0};
        axon_request_param_t param = {};
        axon_request_h       req   = nullptr;
        param.recv_info = &info;
        axon_status_t status = axon_tag_recv_nb(env.worker, small, sizeof(small), 999,
                                                AXON_TAG_MASK_FULL, &param, &req);
        EXPECT_EQ(AXON_ERR_MSG_TRUNCATED, env.wait(status, req, &info));
        EXPECT_EQ(50u, info.length);
    }, [&](Env &env) {
        SendBatch batch;
        for (int i = 0; i < kCases; ++i) {
            post_truncated(env, i, batch);
        }
        batch.post(env, 50, 5, 999);
        ASSERT_TRUE(env.barrier());
        batch.wait(env);
    });
}

/* ---------------------------------------------------------------- completion rules */

TEST_P(Tag, CallbacksFromProgressOnly)
{
    const int kCount = 40;

    Run([&](Env &env) {
        std::vector<CbRecord>             recs(2 * kCount);
        std::vector<std::vector<uint8_t>> bufs(2 * kCount);
        /* First half posted before the messages: expected path. */
        for (int i = 0; i < kCount; ++i) {
            axon_request_param_t param = {};
            axon_request_h       req   = nullptr;
            bufs[i].resize(mixed_size(i));
            param.cb.recv   = recv_cb;
            param.user_data = &recs[i];
            g_in_call = 1;
            axon_status_t status = axon_tag_recv_nb(env.worker, bufs[i].data(), bufs[i].size(),
                                                    77, AXON_TAG_MASK_FULL, &param, &req);
            g_in_call = 0;
            ASSERT_EQ(AXON_INPROGRESS, status);
            axon_request_free(req);
        }
        ASSERT_TRUE(env.barrier());
        ASSERT_TRUE(env.barrier());  /* everything sent */
        axon_test_progress_for(env.worker, 0.05);
        /* Second half: the messages are here; with and without NO_IMM_CMPL. */
        std::vector<axon_request_h> reqs(2 * kCount, nullptr);
        for (int i = kCount; i < 2 * kCount; ++i) {
            axon_request_param_t param = {};
            axon_tag_recv_info_t info;
            bufs[i].resize(mixed_size(i));
            param.cb.recv   = recv_cb;
            param.user_data = &recs[i];
            param.recv_info = &info;
            param.flags     = (i % 2) ? AXON_REQ_FLAG_NO_IMM_CMPL : 0;
            g_in_call = 1;
            axon_status_t status = axon_tag_recv_nb(env.worker, bufs[i].data(), bufs[i].size(),
                                                    77, AXON_TAG_MASK_FULL, &param, &reqs[i]);
            g_in_call = 0;
            if (status == AXON_OK) {
                EXPECT_EQ(0, i % 2) << "NO_IMM_CMPL returned AXON_OK";
                EXPECT_EQ(mixed_size(i), info.length);
                EXPECT_EQ(77u, info.sender_tag);
                recs[i].calls += 1000;  /* marks "no callback expected" */
                reqs[i] = nullptr;
            } else {
                ASSERT_EQ(AXON_INPROGRESS, status) << i;
            }
            /* Whatever happened, no callback yet: we have not progressed. */
            EXPECT_EQ(0, recs[i].calls % 1000) << i;
        }
        double end = axon_test_time() + env.timeout();
        for (;;) {
            bool all = true;
            for (int i = 0; i < 2 * kCount; ++i) {
                all = all && (recs[i].calls > 0);
            }
            if (all || (axon_test_time() > end)) {
                break;
            }
            env.progress();
        }
        axon_test_progress_for(env.worker, 0.02);  /* a second call would show up here */
        for (int i = 0; i < 2 * kCount; ++i) {
            if (recs[i].calls >= 1000) {
                EXPECT_EQ(1000, recs[i].calls) << i << ": callback of an AXON_OK receive";
                continue;
            }
            EXPECT_EQ(1, recs[i].calls) << i;
            EXPECT_EQ(0, recs[i].in_call) << i << ": callback from inside the call";
            EXPECT_EQ(AXON_OK, recs[i].status) << i;
            EXPECT_EQ(&recs[i], recs[i].user_data);
            EXPECT_EQ(mixed_size(i), recs[i].length) << i;
            EXPECT_EQ(77u, recs[i].tag);
            EXPECT_EQ("", check_msg(bufs[i].data(), bufs[i].size(), i));
            if (reqs[i] != nullptr) {
                EXPECT_EQ(AXON_OK, axon_request_test(reqs[i], NULL));
                axon_request_free(reqs[i]);
            }
        }
    }, [&](Env &env) {
        ASSERT_TRUE(env.barrier());
        std::vector<CbRecord>             recs(2 * kCount);
        std::vector<std::vector<uint8_t>> bufs(2 * kCount);
        std::vector<axon_request_h>       reqs(2 * kCount, nullptr);
        for (int i = 0; i < 2 * kCount; ++i) {
            axon_request_param_t param = {};
            bufs[i].resize(mixed_size(i));
            fill_msg(bufs[i].data(), bufs[i].size(), i);
            param.cb.send   = send_cb;
            param.user_data = &recs[i];
            param.flags     = (i % 2) ? AXON_REQ_FLAG_NO_IMM_CMPL : 0;
            g_in_call = 1;
            axon_status_t status = axon_tag_send_nb(env.ep(), bufs[i].data(), bufs[i].size(), 77,
                                                    &param, &reqs[i]);
            g_in_call = 0;
            if (status == AXON_OK) {
                EXPECT_EQ(0, i % 2) << "NO_IMM_CMPL returned AXON_OK";
                recs[i].calls += 1000;
                reqs[i] = nullptr;
            } else {
                ASSERT_EQ(AXON_INPROGRESS, status) << i;
            }
            EXPECT_EQ(0, recs[i].calls % 1000) << i << ": callback before any progress";
        }
        /* All posted: a rendezvous send completes only once its receive is posted. */
        ASSERT_TRUE(env.barrier());
        double end = axon_test_time() + env.timeout();
        for (;;) {
            bool all = true;
            for (auto &r : recs) {
                all = all && (r.calls > 0);
            }
            if (all || (axon_test_time() > end)) {
                break;
            }
            env.progress();
        }
        axon_test_progress_for(env.worker, 0.02);
        for (int i = 0; i < 2 * kCount; ++i) {
            if (recs[i].calls >= 1000) {
                EXPECT_EQ(1000, recs[i].calls) << i << ": callback of an AXON_OK send";
                continue;
            }
            EXPECT_EQ(1, recs[i].calls) << i;
            EXPECT_EQ(0, recs[i].in_call) << i;
            EXPECT_EQ(AXON_OK, recs[i].status) << i;
            EXPECT_EQ(&recs[i], recs[i].user_data);
            EXPECT_EQ(AXON_OK, axon_request_test(reqs[i], NULL));
            axon_request_free(reqs[i]);
        }
    });
}

TEST_P(Tag, NoImmCmplAlwaysGivesRequest)
{
    Run([&](Env &env) {
        ASSERT_TRUE(env.barrier());
        ASSERT_TRUE(env.barrier());
        axon_test_progress_for(env.worker, 0.05);
        /* Messages already here: the receive finishes at once, still as a request. */
        for (int i = 0; i < 3; ++i) {
            uint8_t              buf[64];
            axon_tag_recv_info_t info  = {0, 0};
            axon_request_param_t param = {};
            axon_request_h       req   = nullptr;
            param.flags     = AXON_REQ_FLAG_NO_IMM_CMPL;
            param.recv_info = &info;
            axon_status_t status = axon_tag_recv_nb(env.worker, buf, sizeof(buf), 60 + i,
                                                    AXON_TAG_MASK_FULL, &param, &req);
            ASSERT_EQ(AXON_INPROGRESS, status) << i;
            ASSERT_NE(nullptr, req);
            axon_tag_recv_info_t tinfo = {0, 0};
            EXPECT_EQ(AXON_OK, env.wait(status, req, &tinfo));
            EXPECT_EQ((size_t)i * 10, tinfo.length);
            EXPECT_EQ(60u + i, tinfo.sender_tag);
        }
    }, [&](Env &env) {
        ASSERT_TRUE(env.barrier());
        uint8_t buf[64] = {0};
        for (int i = 0; i < 3; ++i) {
            axon_request_param_t param = {};
            axon_request_h       req   = nullptr;
            param.flags = AXON_REQ_FLAG_NO_IMM_CMPL;
            axon_status_t status = axon_tag_send_nb(env.ep(), buf, i * 10, 60 + i, &param, &req);
            ASSERT_EQ(AXON_INPROGRESS, status) << i;
            ASSERT_NE(nullptr, req);
            EXPECT_EQ(AXON_OK, env.wait(status, req, NULL));
        }
        ASSERT_TRUE(env.barrier());
    });
}

TEST_P(Tag, FreeBeforeCompletion)
{
    const int kCount = 60;

    Run([&](Env &env) {
        std::vector<CbRecord>             recs(kCount);
        std::vector<std::vector<uint8_t>> bufs(kCount);
        int                               calls = 0;
        for (int i = 0; i < kCount; ++i) {
            axon_request_param_t param = {};
            axon_request_h       req   = nullptr;
            bufs[i].resize(mixed_size(i));
            param.flags     = AXON_REQ_FLAG_NO_IMM_CMPL;
            param.cb.recv   = recv_cb;
            param.user_data = &recs[i];
            ASSERT_EQ(AXON_INPROGRESS,
                      axon_tag_recv_nb(env.worker, bufs[i].data(), bufs[i].size(), 88,
                                       AXON_TAG_MASK_FULL, &param, &req));
            axon_request_free(req);  /* long before the message comes */
            if (i == kCount / 2) {
                ASSERT_TRUE(env.barrier());  /* let the sender start with half posted */
            }
        }
        double end = axon_test_time() + env.timeout();
        while ((calls < kCount) && (axon_test_time() < end)) {
            env.progress();
            calls = 0;
            for (auto &r : recs) {
                calls += r.calls;
            }
        }
        axon_test_progress_for(env.worker, 0.02);
        for (int i = 0; i < kCount; ++i) {
            EXPECT_EQ(1, recs[i].calls) << i;
            EXPECT_EQ(AXON_OK, recs[i].status) << i;
            EXPECT_EQ(mixed_size(i), recs[i].length) << i;
            EXPECT_EQ("", check_msg(bufs[i].data(), bufs[i].size(), i));
        }
    }, [&](Env &env) {
        std::vector<CbRecord>             recs(kCount);
        std::vector<std::vector<uint8_t>> bufs(kCount);
        int                               calls = 0;
        ASSERT_TRUE(env.barrier());
        for (int i = 0; i < kCount; ++i) {
            axon_request_param_t param = {};
            axon_request_h       req   = nullptr;
            bufs[i].resize(mixed_size(i));
            fill_msg(bufs[i].data(), bufs[i].size(), i);
            param.flags     = AXON_REQ_FLAG_NO_IMM_CMPL;
            param.cb.send   = send_cb;
            param.user_data = &recs[i];
            ASSERT_EQ(AXON_INPROGRESS, axon_tag_send_nb(env.ep(), bufs[i].data(),
                                                        bufs[i].size(), 88, &param, &req));
            axon_request_free(req);
        }
        double end = axon_test_time() + env.timeout();
        while ((calls < kCount) && (axon_test_time() < end)) {
            env.progress();
            calls = 0;
            for (auto &r : recs) {
                calls += r.calls;
            }
        }
        axon_test_progress_for(env.worker, 0.02);
        for (int i = 0; i < kCount; ++i) {
            EXPECT_EQ(1, recs[i].calls) << i;
            EXPECT_EQ(AXON_OK, recs[i].status) << i;
        }
    });
}

/*
 * Callbacks that start operations: each side answers from inside its receive
 * callback. Whatever those calls complete at once must still be called back
 * later, from progress: never nested inside the call made by the callback.
 */
struct Chain {
    Env                 *env;
    axon_tag_t           recv_tag, send_tag;
    int                  limit;       /* messages to receive */
    bool                 starter;     /* sends the first message */
    int                  received = 0;
    int                  depth    = 0;
    int                  nested   = 0;  /* callbacks entered while inside another, or a call */
    int                  errors   = 0;
    uint8_t              rbuf[64];
    uint8_t              sbuf[64];
};

void chain_post_recv(Chain *c);

void chain_send(Chain *c, int seq)
{
    axon_request_h       req   = nullptr;
    axon_request_param_t param = {};
    size_t               len   = 8 + seq % 40;

    fill_msg(c->sbuf, len, seq);
    param.flags = AXON_REQ_FLAG_NO_IMM_CMPL;
    g_in_call++;
    axon_status_t status = axon_tag_send_nb(c->env->ep(), c->sbuf, len, c->send_tag, &param,
                                            &req);
    g_in_call--;
    if (status != AXON_INPROGRESS) {
        ++c->errors;
        return;
    }
    axon_request_free(req);  /* completes on its own */
}

void chain_recv_cb(axon_request_h req, axon_status_t status, const axon_tag_recv_info_t *info,
                   void *arg)
{
    Chain *c = static_cast<Chain *>(arg);

    c->nested += (c->depth > 0) || (g_in_call > 0);
    c->depth++;
    if ((status != AXON_OK) || (check_msg(c->rbuf, info->length, c->received) != "")) {
        ++c->errors;
    }
    int seq = c->received++;
    if (c->received < c->limit) {
        chain_post_recv(c);
    }
    /* The starter sent seq; the other side answers it with seq, the starter goes on with seq+1. */
    if (!c->starter) {
        chain_send(c, seq);
    } else if (seq + 1 < c->limit) {
        chain_send(c, seq + 1);
    }
    axon_request_free(req);
    c->depth--;
}

void chain_post_recv(Chain *c)
{
    axon_request_h       req   = nullptr;
    axon_request_param_t param = {};

    param.flags     = AXON_REQ_FLAG_NO_IMM_CMPL;
    param.cb.recv   = chain_recv_cb;
    param.user_data = c;
    g_in_call++;
    axon_status_t status = axon_tag_recv_nb(c->env->worker, c->rbuf, sizeof(c->rbuf),
                                            c->recv_tag, AXON_TAG_MASK_FULL, &param, &req);
    g_in_call--;
    if (status != AXON_INPROGRESS) {
        ++c->errors;
    }
    /* Not freed here: the callback frees it. */
}

TEST_P(Tag, CallbacksStartingOperations)
{
    const int kRounds = 300;

    auto play = [&](Env &env, bool starter) {
        Chain c;
        c.env      = &env;
        c.recv_tag = starter ? kTagPong : kTagPing;
        c.send_tag = starter ? kTagPing : kTagPong;
        c.limit    = kRounds;
        c.starter  = starter;
        chain_post_recv(&c);
        ASSERT_TRUE(env.barrier());
        if (starter) {
            chain_send(&c, 0);
        }
        EXPECT_TRUE(env.progress_until([&] { return c.received == kRounds; }))
            << c.received << " of " << kRounds;
        /* Let the last sends finish before the buffers go away. */
        ASSERT_TRUE(env.barrier());
        EXPECT_EQ(0, c.errors);
        EXPECT_EQ(0, c.nested) << "callbacks ran nested inside other calls";
    };
    Run([&](Env &env) { play(env, false); }, [&](Env &env) { play(env, true); });
}

/* A receive posted from a callback, for a message already here, calls back later. */
struct Nest {
    Env     *env;
    int      calls[2] = {0, 0};
    int      nested   = 0;
    int      depth    = 0;
    uint8_t  buf[2][16];
};

void nest_inner_cb(axon_request_h req, axon_status_t status, const axon_tag_recv_info_t *info,
                   void *arg)
{
    Nest *n = static_cast<Nest *>(arg);
    n->nested += (n->depth > 0) || (g_in_call > 0);
    n->calls[1]++;
    axon_request_free(req);
}

void nest_outer_cb(axon_request_h req, axon_status_t status, const axon_tag_recv_info_t *info,
                   void *arg)
{
    Nest                *n     = static_cast<Nest *>(arg);
    axon_request_h       inner = nullptr;
    axon_request_param_t param = {};

    n->nested += (n->depth > 0) || (g_in_call > 0);
    n->depth++;
    n->calls[0]++;
    param.flags     = AXON_REQ_FLAG_NO_IMM_CMPL;
    param.cb.recv   = nest_inner_cb;
    param.user_data = n;
    g_in_call++;
    axon_status_t st = axon_tag_recv_nb(n->env->worker, n->buf[1], sizeof(n->buf[1]), 2,
                                        AXON_TAG_MASK_FULL, &param, &inner);
    g_in_call--;
    EXPECT_EQ(AXON_INPROGRESS, st);
    axon_request_free(req);
    n->depth--;
}

TEST_P(Tag, CallbackReceivesArrivedMessage)
{
    Run([&](Env &env) {
        Nest n;
        n.env = &env;
        ASSERT_TRUE(env.barrier());  /* both messages sent */
        axon_test_progress_for(env.worker, 0.02);
        axon_request_h       req   = nullptr;
        axon_request_param_t param = {};
        param.flags     = AXON_REQ_FLAG_NO_IMM_CMPL;
        param.cb.recv   = nest_outer_cb;
        param.user_data = &n;
        ASSERT_EQ(AXON_INPROGRESS, axon_tag_recv_nb(env.worker, n.buf[0], sizeof(n.buf[0]), 1,
                                                    AXON_TAG_MASK_FULL, &param, &req));
        EXPECT_TRUE(env.progress_until([&] { return n.calls[1] > 0; }));
        EXPECT_EQ(1, n.calls[0]);
        EXPECT_EQ(1, n.calls[1]);
        EXPECT_EQ(0, n.nested) << "the inner callback ran inside the receive call";
    }, [&](Env &env) {
        ASSERT_EQ(AXON_OK, env.send("outer", 5, 1));
        ASSERT_EQ(AXON_OK, env.send("inner", 5, 2));
        ASSERT_TRUE(env.barrier());
    });
}

/* ---------------------------------------------------------------- many in flight */

TEST_P(Tag, ManyOutstandingSends)
{
    const int    kWindow = 512;
    const size_t kLen    = 4096;

    Run([&](Env &env) {
        /* The sender posts the whole window before we drain anything. */
        ASSERT_TRUE(env.barrier_no_progress());
        std::vector<uint8_t> buf(kLen);
        for (int i = 0; i < kWindow; ++i) {
            axon_tag_recv_info_t info;
            ASSERT_EQ(AXON_OK, env.recv(buf.data(), kLen, 9, AXON_TAG_MASK_FULL, &info)) << i;
            ASSERT_EQ(kLen, info.length);
            ASSERT_EQ("", check_msg(buf.data(), kLen, i));
        }
    }, [&](Env &env) {
        std::vector<std::vector<uint8_t>> bufs(kWindow, std::vector<uint8_t>(kLen));
        std::vector<axon_request_h>       reqs(kWindow, nullptr);
        std::vector<axon_status_t>        st(kWindow);
        int                               pending = 0;
        for (int i = 0; i < kWindow; ++i) {
            fill_msg(bufs[i].data(), kLen, i);
            st[i] = axon_tag_send_nb(env.ep(), bufs[i].data(), kLen, 9, NULL, &reqs[i]);
            ASSERT_TRUE((st[i] == AXON_OK) || (st[i] == AXON_INPROGRESS)) << i;
            pending += (st[i] == AXON_INPROGRESS);
        }
        ASSERT_TRUE(env.barrier_no_progress());
        for (int i = 0; i < kWindow; ++i) {
            EXPECT_EQ(AXON_OK, env.wait(st[i], reqs[i], NULL)) << i;
        }
        if (env.is_shm) {
            /* 2 MiB cannot all fit the peer's ring: some sends had to wait. */
            EXPECT_GT(pending, 0);
        }
    });
}

TEST_P(Tag, CloseFlushDeliversQueued)
{
    const int kCount = 300;

    Run([&](Env &env) {
        std::vector<uint8_t> buf(64 * 1024);
        for (int i = 0; i < kCount; ++i) {
            axon_tag_recv_info_t info;
            ASSERT_EQ(AXON_OK, env.recv(buf.data(), buf.size(), 11, AXON_TAG_MASK_FULL, &info))
                << i;
            ASSERT_EQ(mixed_size(i), info.length);
            ASSERT_EQ("", check_msg(buf.data(), info.length, i));
        }
    }, [&](Env &env) {
        std::vector<std::vector<uint8_t>> bufs(kCount);
        std::vector<axon_request_h>       reqs(kCount, nullptr);
        std::vector<CbRecord>             recs(kCount);
        for (int i = 0; i < kCount; ++i) {
            axon_request_param_t param = {};
            bufs[i].resize(mixed_size(i));
            fill_msg(bufs[i].data(), bufs[i].size(), i);
            param.flags     = AXON_REQ_FLAG_NO_IMM_CMPL;
            param.cb.send   = send_cb;
            param.user_data = &recs[i];
            ASSERT_EQ(AXON_INPROGRESS, axon_tag_send_nb(env.ep(), bufs[i].data(),
                                                        bufs[i].size(), 11, &param, &reqs[i]));
        }
        /* Close at once: the flush must push out everything queued. */
        axon_ep_h ep = env.ep();
        *env.ep_slot = nullptr;
        EXPECT_EQ(AXON_OK, axon_test_ep_close(env.worker, ep, AXON_EP_CLOSE_FLUSH, env.timeout()));
        axon_test_progress_for(env.worker, 0.01);
        for (int i = 0; i < kCount; ++i) {
            EXPECT_EQ(AXON_OK, axon_request_test(reqs[i], NULL)) << i;
            EXPECT_EQ(1, recs[i].calls) << i;
            EXPECT_EQ(AXON_OK, recs[i].status) << i;
            axon_request_free(reqs[i]);
        }
    });
}

TEST_P(Tag, CloseForceCancelsQueued)
{
    const int kCount = 400;

    Run([&](Env &env) {
        /* Do not drain the ring until the sender has closed. */
        ASSERT_TRUE(env.barrier_no_progress());
        uint64_t delivered = env.bcast(0, 1);
        std::vector<uint8_t> buf(256);
        for (uint64_t i = 0; i < delivered; ++i) {
            axon_tag_recv_info_t info;
            ASSERT_EQ(AXON_OK, env.recv(buf.data(), buf.size(), 12, AXON_TAG_MASK_FULL, &info))
                << i;
            ASSERT_EQ("", check_msg(buf.data(), info.length, i));
        }
        /* Cancelled messages never show up. */
        axon_test_progress_for(env.worker, 0.05);
        EXPECT_EQ(0u, env.worker->tm[0].num_unexpected) << "a cancelled send was delivered";
    }, [&](Env &env) {
        std::vector<std::vector<uint8_t>> bufs(kCount);
        std::vector<axon_request_h>       reqs(kCount, nullptr);
        std::vector<CbRecord>             recs(kCount);
        for (int i = 0; i < kCount; ++i) {
            axon_request_param_t param = {};
            bufs[i].resize(8 + i % 100);  /* single-fragment messages only */
            fill_msg(bufs[i].data(), bufs[i].size(), i);
            param.flags     = AXON_REQ_FLAG_NO_IMM_CMPL;
            param.cb.send   = send_cb;
            param.user_data = &recs[i];
            ASSERT_EQ(AXON_INPROGRESS, axon_tag_send_nb(env.ep(), bufs[i].data(),
                                                        bufs[i].size(), 12, &param, &reqs[i]));
        }
        axon_ep_h ep = env.ep();
        *env.ep_slot = nullptr;
        EXPECT_EQ(AXON_OK, axon_test_ep_close(env.worker, ep, AXON_EP_CLOSE_FORCE, env.timeout()));
        axon_test_progress_for(env.worker, 0.01);
        /* A prefix went out; the rest was cancelled; each called back once. */
        uint64_t delivered = 0;
        for (int i = 0; i < kCount; ++i) {
            axon_status_t st = axon_request_test(reqs[i], NULL);
            EXPECT_EQ(1, recs[i].calls) << i;
            EXPECT_EQ(st, recs[i].status) << i;
            if (st == AXON_OK) {
                EXPECT_EQ(delivered, (uint64_t)i) << "send " << i << " completed after a cancel";
                ++delivered;
            } else {
                EXPECT_EQ(AXON_ERR_CANCELED, st) << i;
            }
            axon_request_free(reqs[i]);
        }
        if (env.is_shm) {
            EXPECT_LT(delivered, (uint64_t)kCount) << "the ring never filled";
        }
        ASSERT_TRUE(env.barrier_no_progress());
        env.bcast(delivered, 1);
    });
}

/* Every transport once; tcp_rndv keeps the rendezvous protocol in every pass. */
const TransportParam kTransports[] = {
    {"self", "self", 1},
    {"shm", "shm", 1},  /* the forked peer is rank 1 */
    {"tcp", "tcp", 1},
    {"tcp_rndv", "tcp", 1, false, {{"RNDV_THRESH", "16K"}}},
    /* softib's RDMA transports over its shm wire: rc gets rendezvous data by RDMA read,
     * ud (no RDMA) has it streamed in bcopy fragments. */
    {"rc", "rc", 1},
    {"ud", "ud", 1},
    {"dc", "dc", 1},
};
/* The same transports with roles swapped, protocols forced or two network namespaces. */
const TransportParam kVariants[] = {
    {"self_rndv", "self", 1, false, {{"RNDV_THRESH", "16K"}}},
    {"shm_rev", "shm", 0},  /* the forked peer is rank 0 */
    /* Single copy (CMA) whatever it costs here. */
    {"shm_rndv", "shm", 1, false, {{"RNDV_THRESH", "16K"}, {"RNDV_SCHEME", "get"}}},
    /* No single copy: rendezvous data goes through the ring. */
    {"shm_nocma", "shm", 1, false, {{"RNDV_THRESH", "16K"}, {"SHM_CMA", "n"}}},
    {"tcp_rev", "tcp", 0},
    {"tcp_netns", "tcp", 1, true},
    /* Bulk data in the smallest sendmsg/recv pieces: a message crosses many. */
    {"tcp_chunk64k", "tcp", 1, false, {{"RNDV_THRESH", "16K"}, {"TCP_IO_CHUNK", "64k"}}},
    {"rc_rev", "rc", 0},
    {"rc_rndv", "rc", 1, false, {{"RNDV_THRESH", "16K"}}},
    {"ud_rndv", "ud", 1, false, {{"RNDV_THRESH", "16K"}}},
    {"dc_rndv", "dc", 1, false, {{"RNDV_THRESH", "16K"}}},
    {"dc_shared", "dc", 1, false, {{"DC_POLICY", "shared"}}},
};

INSTANTIATE_TEST_SUITE_P(Lanes, Tag, ::testing::ValuesIn(kTransports), transport_name);
INSTANTIATE_TEST_SUITE_P(Variants, Tag, ::testing::ValuesIn(kVariants), transport_name);
INSTANTIATE_TEST_SUITE_P(Lanes, TagSlow, ::testing::ValuesIn(kTransports), transport_name);
INSTANTIATE_TEST_SUITE_P(Variants, TagSlow, ::testing::ValuesIn(kVariants), transport_name);

/* ---------------------------------------------------------------- many senders */

const int kSenders         = 3;
const int kMsgsPerSender   = 2000;
const axon_tag_t kTagMulti = 0x4D554C5449ull;

size_t multi_size(int seq)
{
    return (seq % 50 == 0) ? 9000 + seq % 7 : 16 + (seq * 7) % 300;
}

/* Payload: [sender][seq][pattern]. */
int multi_sender_main(int fd, void *arg)
{
    int                  id = *static_cast<int *>(arg);
    NodeGuard            ng;
    axon_test_node_t    &node = ng.node;
    axon_ep_h            ep   = nullptr;
    std::vector<uint8_t> buf(16384);

    if (axon_test_node_create(&node, "shm", NULL, 0) != AXON_OK) {
        return 2;
    }
    if (axon_test_connect_peer(fd, &node, &ep) != 0) {
        return 3;
    }
    /* All senders start together. */
    if (axon_test_sync(fd) != 0) {
        return 4;
    }
    for (int seq = 0; seq < kMsgsPerSender; ++seq) {
        size_t len = multi_size(seq);
        axon_test_fill(buf.data(), len, msg_seed(seq, len) + id);
        memcpy(buf.data(), &id, sizeof(id));
        memcpy(buf.data() + sizeof(id), &seq, sizeof(seq));
        axon_status_t status = axon_test_send(node.worker, ep, buf.data(), len, kTagMulti,
                                              kOpTimeout);
        if (status != AXON_OK) {
            fprintf(stderr, "sender %d: message %d: %s\n", id, seq, axon_status_string(status));
            return 5;
        }
    }
    if ((axon_test_ep_close(node.worker, ep, AXON_EP_CLOSE_FLUSH, kOpTimeout) != AXON_OK) ||
        (axon_test_sync_progress(fd, node.worker, kOpTimeout) != 0)) {
        return 6;
    }
    return 0;
}

/* Kills and reaps peers a failed assertion left behind. */
struct PeerGuard {
    axon_test_peer_t *peers;
    int               count;
    ~PeerGuard()
    {
        for (int i = 0; i < count; ++i) {
            axon_test_peer_kill(&peers[i]);
        }
    }
};

TEST(TagShmSlow, ManySendersOneReceiver)
{
    axon_test_peer_t peers[kSenders];
    int              ids[kSenders];
    PeerGuard        peer_guard = {peers, 0};
    NodeGuard        ng;
    axon_test_node_t &node = ng.node;

    /* Fork before this process creates any Axon object. */
    for (int i = 0; i < kSenders; ++i) {
        ids[i] = i;
        ASSERT_EQ(0, axon_test_peer_spawn(&peers[i], multi_sender_main, &ids[i], kPeerTimeout));
        peer_guard.count = i + 1;
    }
    ASSERT_EQ(AXON_OK, axon_test_node_create(&node, "shm", NULL, 0));
    for (int i = 0; i < kSenders; ++i) {
        void  *addr;
        size_t len;
        ASSERT_EQ(0, axon_test_exchange_address(peers[i].fd, node.address, node.address_length,
                                                &addr, &len));
        free(addr);  /* receive only: no endpoint back */
    }
    /* Release the senders. */
    for (int i = 0; i < kSenders; ++i) {
        ASSERT_EQ(0, axon_test_sync(peers[i].fd));
    }

    double               deadline = axon_test_time() + kRunTimeout;
    int                  next[kSenders] = {0};
    std::vector<uint8_t> buf(16384);
    int                  bad = 0;
    for (int n = 0; (n < kSenders * kMsgsPerSender) && (bad < 10); ++n) {
        axon_tag_recv_info_t info;
        double               left   = deadline - axon_test_time();
        axon_status_t        status = axon_test_recv(node.worker, buf.data(), buf.size(),
                                                     kTagMulti, AXON_TAG_MASK_FULL, &info,
                                                     left > 0 ? left : 0.001);
        ASSERT_EQ(AXON_OK, status) << "message " << n << ": " << axon_status_string(status);
        int id, seq;
        ASSERT_GE(info.length, 8u);
        memcpy(&id, buf.data(), sizeof(id));
        memcpy(&seq, buf.data() + sizeof(id), sizeof(seq));
        ASSERT_TRUE((id >= 0) && (id < kSenders)) << "message " << n << " from sender " << id;
        if (seq != next[id]) {
            ADD_FAILURE() << "sender " << id << ": message " << seq << " where " << next[id]
                          << " was expected";
            ++bad;
        }
        next[id] = seq + 1;
        EXPECT_EQ(multi_size(seq), info.length);
        std::vector<uint8_t> expect(info.length);
        axon_test_fill(expect.data(), info.length, msg_seed(seq, info.length) + id);
        if (memcmp(expect.data() + 8, buf.data() + 8, info.length - 8) != 0) {
            ADD_FAILURE() << "sender " << id << " message " << seq << ": payload corrupted";
            ++bad;
        }
    }
    for (int i = 0; i < kSenders; ++i) {
        EXPECT_EQ(kMsgsPerSender, next[i]) << "sender " << i;
    }
    /* Nothing extra. */
    axon_test_progress_for(node.worker, 0.05);
    EXPECT_EQ(0u, node.worker->tm[0].num_unexpected);
    for (int i = 0; i < kSenders; ++i) {
        EXPECT_EQ(0, axon_test_sync_progress(peers[i].fd, node.worker, kOpTimeout));
    }
    for (int i = 0; i < kSenders; ++i) {
        EXPECT_EQ(0, axon_test_peer_wait(&peers[i], kPeerTimeout)) << "sender " << i;
    }
}

}  // namespace
