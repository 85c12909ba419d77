/*
 * Tag messaging beyond send and receive, as MPI uses it: probe and matched
 * probe (MPI_Iprobe, MPI_Improbe/MPI_Mrecv), cancel of a posted receive,
 * synchronous send (MPI_Ssend), many senders to one receiver with tags that
 * carry the sender's rank, very large messages in both directions, and a
 * receiver that never opens an endpoint back to its sender.
 *
 * Rendezvous sizes (kRndvLen) are above any automatic threshold, so every
 * variant exercises both protocols; the _rndv variants move the threshold
 * to 16 KiB, and shm_nocma pipelines rendezvous data through the ring
 * instead of reading the sender's memory.
 */
#include "tag_env.h"

namespace {

/* Above any rendezvous threshold a transport may choose: rendezvous everywhere. */
const size_t kRndvLen = ((size_t)4 << 20) + 5;

/* Small, eager everywhere; 20000 B, eager by default but rendezvous at 16K; kRndvLen. */
const size_t kProtoSizes[] = {100, 20000, kRndvLen};

class TagExt : public ::testing::TestWithParam<TransportParam> {
protected:
    void Run(Role role0, Role role1, std::vector<axon_config_kv_t> config = {})
    {
        run_roles(GetParam(), role0, role1, config);
    }
};

axon_status_t probe(Env &env, axon_tag_t tag, axon_tag_t mask, int remove,
                    axon_tag_recv_info_t *info, axon_tag_message_h *msg)
{
    return axon_tag_probe_nb(env.worker, tag, mask, remove, info, msg);
}

/* Progress until a probe for (tag, mask) finds a message; its status. */
axon_status_t probe_wait(Env &env, axon_tag_t tag, axon_tag_t mask, int remove,
                         axon_tag_recv_info_t *info, axon_tag_message_h *msg)
{
    axon_status_t status = AXON_ERR_NO_MESSAGE;

    env.progress_until([&] {
        status = probe(env, tag, mask, remove, info, msg);
        return status != AXON_ERR_NO_MESSAGE;
    });
    return status;
}

/* Receive a message taken by a matched probe; frees the request. */
axon_status_t msg_recv(Env &env, void *buf, size_t len, axon_tag_message_h msg,
                       axon_tag_recv_info_t *info)
{
    axon_tag_recv_info_t imm_info = {0, 0};
    axon_request_param_t param    = {};
    axon_request_h       req      = nullptr;

    param.recv_info = &imm_info;
    axon_status_t status = axon_tag_msg_recv_nb(env.worker, buf, len, msg, &param, &req);
    if (status == AXON_INPROGRESS) {
        return env.wait(status, req, info);
    }
    *info = imm_info;
    return status;
}

/* ---------------------------------------------------------------- probe */

TEST_P(TagExt, ProbeLeavesMessageQueued)
{
    const axon_tag_t kTagA = 0x100, kTagB = 0x200, kTagC = 0x300;
    const size_t     kLenA = 100;

    Run([&](Env &env) {
        axon_tag_recv_info_t info = {0, 0};
        axon_tag_message_h   msg  = nullptr;

        EXPECT_EQ(AXON_ERR_NO_MESSAGE, probe(env, 0, 0, 0, &info, &msg)) << "nothing sent yet";
        ASSERT_TRUE(env.barrier());

        /* C is sent last: once it is here, so are A and B. */
        ASSERT_EQ(AXON_OK, probe_wait(env, kTagC, AXON_TAG_MASK_FULL, 0, &info, &msg));
        EXPECT_EQ(kTagC, info.sender_tag);
        EXPECT_EQ(0u, info.length);

        /* Probing twice finds the message twice: it stays queued. */
        for (int i = 0; i < 2; ++i) {
            info = {0, 0};
            ASSERT_EQ(AXON_OK, probe(env, kTagA, AXON_TAG_MASK_FULL, 0, &info, &msg)) << i;
            EXPECT_EQ(kTagA, info.sender_tag);
            EXPECT_EQ(kLenA, info.length);
        }
        /* A rendezvous message reports its full length, not what has arrived. */
        ASSERT_EQ(AXON_OK, probe(env, kTagB, AXON_TAG_MASK_FULL, 0, &info, &msg));
        EXPECT_EQ(kTagB, info.sender_tag);
        EXPECT_EQ(kRndvLen, info.length);
        /* Wildcards: the oldest match, as a receive with the same tag would get. */
        ASSERT_EQ(AXON_OK, probe(env, 0, 0, 0, &info, &msg));
        EXPECT_EQ(kTagA, info.sender_tag) << "a wildcard probe skipped the oldest message";
        ASSERT_EQ(AXON_OK, probe(env, 0x2ff, 0xf00, 0, &info, &msg));
        EXPECT_EQ(kTagB, info.sender_tag);
        EXPECT_EQ(AXON_ERR_NO_MESSAGE, probe(env, 0x400, AXON_TAG_MASK_FULL, 0, &info, &msg));
        EXPECT_EQ(AXON_ERR_NO_MESSAGE, probe(env, 0x4ff, 0xff, 0, &info, &msg));

        /* Receives get what the probes saw. */
        std::vector<uint8_t> buf(kRndvLen);
        ASSERT_EQ(AXON_OK, env.recv(buf.data(), kLenA, kTagA, AXON_TAG_MASK_FULL, &info));
        EXPECT_EQ(kLenA, info.length);
        EXPECT_EQ("", check_msg(buf.data(), kLenA, 1));
        ASSERT_EQ(AXON_OK, probe(env, 0, 0, 0, &info, &msg));
        EXPECT_EQ(kTagB, info.sender_tag) << "the received message is still reported";
        EXPECT_EQ(kRndvLen, info.length);
        ASSERT_EQ(AXON_OK, env.recv(buf.data(), kRndvLen, 0, 0, &info));
        EXPECT_EQ(kTagB, info.sender_tag);
        EXPECT_EQ(kRndvLen, info.length);
        EXPECT_EQ("", check_msg(buf.data(), kRndvLen, 2));
        ASSERT_EQ(AXON_OK, probe(env, 0, 0, 0, &info, &msg));
        EXPECT_EQ(kTagC, info.sender_tag);
        ASSERT_EQ(AXON_OK, env.recv(NULL, 0, kTagC, AXON_TAG_MASK_FULL, &info));
        EXPECT_EQ(AXON_ERR_NO_MESSAGE, probe(env, 0, 0, 0, &info, &msg));
    }, [&](Env &env) {
        SendBatch batch;
        ASSERT_TRUE(env.barrier());
        batch.post(env, kLenA, 1, kTagA);
        batch.post(env, kRndvLen, 2, kTagB);
        batch.post(env, 0, 3, kTagC);
        batch.wait(env);
    });
}

/* ---------------------------------------------------------------- sender and immediate data */

/* Send with (has_imm ? imm : nothing) and wait for completion. */
axon_status_t send_imm(Env &env, const void *buf, size_t len, axon_tag_t tag, bool has_imm,
                       uint32_t imm, bool sync)
{
    axon_request_param_t param = {};
    axon_request_h       req   = nullptr;

    if (has_imm) {
        param.flags    = AXON_REQ_FLAG_IMM_DATA;
        param.imm_data = imm;
    }
    axon_status_t status = sync ? axon_tag_send_sync_nb(env.ep(), buf, len, tag, &param, &req) :
                                  axon_tag_send_nb(env.ep(), buf, len, tag, &param, &req);
    return env.wait(status, req, nullptr);
}

/* Post a receive that takes only messages of sender (AXON_SENDER_ANY: any). */
axon_status_t recv_from(Env &env, void *buf, size_t len, axon_tag_t tag, axon_tag_t mask,
                        uint64_t sender, axon_tag_recv_info_t *info, axon_request_h *req)
{
    axon_request_param_t param = {};

    param.flags     = AXON_REQ_FLAG_SENDER;
    param.sender_id = sender;
    param.recv_info = info;
    return axon_tag_recv_nb(env.worker, buf, len, tag, mask, &param, req);
}

/*
 * Every protocol (empty, short, fragmented, rendezvous, synchronous) carries
 * the sender's id and the immediate data, to posted receives, to unexpected
 * ones and to probes; a receive or probe naming another sender never takes
 * the message, one naming this sender does.
 */
TEST_P(TagExt, SenderIdAndImmediateData)
{
    const size_t   kSizes[] = {0, 100, 20000, kRndvLen};
    const uint64_t kNobody  = 0x0123456789abcdefull;  /* no worker has this id */

    Run([&](Env &env) {
        uint64_t sender = env.bcast(0, 1);
        std::vector<uint8_t> buf(kRndvLen);

        EXPECT_EQ(sender, axon_ep_peer_id(env.ep())) << "the endpoint names another worker";
        EXPECT_NE(AXON_SENDER_ANY, axon_worker_id(env.worker));
        for (size_t i = 0; i < sizeof(kSizes) / sizeof(kSizes[0]); ++i) {
            size_t               len  = kSizes[i];
            axon_tag_recv_info_t info = {};
            axon_tag_message_h   msg  = nullptr;
            axon_request_h       wrong = nullptr, req = nullptr;

            /* Posted first: a receive for nobody, then one for the sender (message 1). */
            axon_status_t st_wrong = recv_from(env, buf.data(), buf.size(), 0x10 + i,
                                               AXON_TAG_MASK_FULL, kNobody, &info, &wrong);
            ASSERT_EQ(AXON_INPROGRESS, st_wrong);
            axon_status_t st = recv_from(env, buf.data(), buf.size(), 0x10 + i,
                                         AXON_TAG_MASK_FULL, sender, &info, &req);
            ASSERT_TRUE(env.barrier());
            ASSERT_EQ(AXON_OK, env.wait(st, req, &info)) << "size " << len;
            EXPECT_EQ(0x10 + i, info.sender_tag);
            EXPECT_EQ(len, info.length);
            EXPECT_EQ(sender, info.sender_id);
            EXPECT_EQ(AXON_TAG_INFO_IMM_DATA, info.flags);
            EXPECT_EQ(0xa5000000u + i, info.imm_data);
            EXPECT_EQ("", check_msg(buf.data(), len, 1));

            /* Unexpected (message 2, no immediate data): probes from nobody miss it. */
            ASSERT_EQ(AXON_OK, probe_wait(env, 0x20 + i, AXON_TAG_MASK_FULL, 0, &info, &msg));
            EXPECT_EQ(AXON_ERR_NO_MESSAGE,
                      axon_tag_probe_from_nb(env.worker, kNobody, 0, 0, 0, &info, &msg));
            info = {};
            ASSERT_EQ(AXON_OK,
                      axon_tag_probe_from_nb(env.worker, sender, 0, 0, 0, &info, &msg));
            EXPECT_EQ(0x20 + i, info.sender_tag);
            EXPECT_EQ(sender, info.sender_id);
            EXPECT_EQ(0u, info.flags);
            EXPECT_EQ(0u, info.imm_data);
            /* A wildcard receive for nobody stays posted; one for the sender gets it. */
            axon_request_h wrong2 = nullptr;
            ASSERT_EQ(AXON_INPROGRESS, recv_from(env, buf.data(), buf.size(), 0, 0, kNobody,
                                                 &info, &wrong2));
            st = recv_from(env, buf.data(), buf.size(), 0, 0, sender, &info, &req);
            ASSERT_EQ(AXON_OK, env.wait(st, req, &info));
            EXPECT_EQ(0x20 + i, info.sender_tag);
            EXPECT_EQ(sender, info.sender_id);
            EXPECT_EQ(0u, info.flags);
            EXPECT_EQ("", check_msg(buf.data(), len, 2));

            /* Synchronous (message 3), taken by a removing probe from the sender. */
            ASSERT_EQ(AXON_OK, probe_wait(env, 0x30 + i, AXON_TAG_MASK_FULL, 0, &info, &msg));
            ASSERT_EQ(AXON_OK, axon_tag_probe_from_nb(env.worker, sender, 0x30 + i,
                                                      AXON_TAG_MASK_FULL, 1, &info, &msg));
            EXPECT_EQ(0xffffffffu, info.imm_data);
            EXPECT_EQ(AXON_TAG_INFO_IMM_DATA, info.flags);
            info = {};
            ASSERT_EQ(AXON_OK, msg_recv(env, buf.data(), buf.size(), msg, &info));
            EXPECT_EQ(sender, info.sender_id);
            EXPECT_EQ(0xffffffffu, info.imm_data);
            EXPECT_EQ("", check_msg(buf.data(), len, 3));

            /* The receives for nobody never matched anything. */
            env.progress();
            EXPECT_EQ(AXON_OK, axon_request_cancel(env.worker, wrong));
            EXPECT_EQ(AXON_ERR_CANCELED, env.wait(AXON_INPROGRESS, wrong, &info));
            EXPECT_EQ(AXON_OK, axon_request_cancel(env.worker, wrong2));
            EXPECT_EQ(AXON_ERR_CANCELED, env.wait(AXON_INPROGRESS, wrong2, &info));
            ASSERT_TRUE(env.barrier());
        }
    }, [&](Env &env) {
        env.bcast(axon_worker_id(env.worker), 1);
        std::vector<uint8_t> buf(kRndvLen);
        for (size_t i = 0; i < sizeof(kSizes) / sizeof(kSizes[0]); ++i) {
            size_t len = kSizes[i];
            ASSERT_TRUE(env.barrier());
            fill_msg(buf.data(), len, 1);
            ASSERT_EQ(AXON_OK, send_imm(env, buf.data(), len, 0x10 + i, true, 0xa5000000u + i,
                                        false));
            fill_msg(buf.data(), len, 2);
            ASSERT_EQ(AXON_OK, send_imm(env, buf.data(), len, 0x20 + i, false, 0, false));
            fill_msg(buf.data(), len, 3);
            ASSERT_EQ(AXON_OK, send_imm(env, buf.data(), len, 0x30 + i, true, 0xffffffffu,
                                        true));
            ASSERT_TRUE(env.barrier());
        }
    });
}

/* ---------------------------------------------------------------- matched probe */

/*
 * Two messages with one tag: a removing probe takes the first out of the
 * queues, so a receive for that tag gets the second, and the first arrives
 * only through axon_tag_msg_recv_nb. Odd rounds receive in the other order.
 */
TEST_P(TagExt, MatchedProbeTakesMessageOut)
{
    const axon_tag_t kTag = 7;
    const int        kRounds = sizeof(kProtoSizes) / sizeof(kProtoSizes[0]) * 2;

    Run([&](Env &env) {
        for (int r = 0; r < kRounds; ++r) {
            size_t               len  = kProtoSizes[r / 2];
            axon_tag_recv_info_t info = {0, 0};
            axon_tag_message_h   msg  = nullptr;
            GuardedBuf           first(len), second(len);

            ASSERT_TRUE(env.barrier());
            ASSERT_EQ(AXON_OK, probe_wait(env, kTag, AXON_TAG_MASK_FULL, 1, &info, &msg))
                << "round " << r;
            ASSERT_NE(nullptr, msg);
            EXPECT_EQ(kTag, info.sender_tag);
            EXPECT_EQ(len, info.length);

            axon_request_param_t param = {};
            axon_request_h       req   = nullptr;
            axon_tag_recv_info_t rinfo = {0, 0};
            param.flags = AXON_REQ_FLAG_NO_IMM_CMPL;
            if (r % 2 == 0) {
                /* The receive, posted first, must not see the removed message. */
                axon_status_t st = axon_tag_recv_nb(env.worker, second.data(), len, kTag,
                                                    AXON_TAG_MASK_FULL, &param, &req);
                ASSERT_EQ(AXON_OK, env.wait(st, req, &rinfo)) << "round " << r;
                ASSERT_EQ(AXON_OK, msg_recv(env, first.data(), len, msg, &info));
            } else {
                ASSERT_EQ(AXON_OK, msg_recv(env, first.data(), len, msg, &info));
                axon_status_t st = axon_tag_recv_nb(env.worker, second.data(), len, kTag,
                                                    AXON_TAG_MASK_FULL, &param, &req);
                ASSERT_EQ(AXON_OK, env.wait(st, req, &rinfo)) << "round " << r;
            }
            EXPECT_EQ(len, info.length);
            EXPECT_EQ(kTag, info.sender_tag);
            EXPECT_EQ("", check_msg(first.data(), len, 100 * r + 1)) << "the probed message";
            EXPECT_EQ(len, rinfo.length);
            EXPECT_EQ("", check_msg(second.data(), len, 100 * r + 2)) << "the next message";
            EXPECT_TRUE(first.guard_intact());
            EXPECT_TRUE(second.guard_intact());
            EXPECT_EQ(AXON_ERR_NO_MESSAGE, probe(env, 0, 0, 0, &info, &msg)) << "round " << r;
            ASSERT_TRUE(env.barrier());  /* before the next round is sent */
        }
    }, [&](Env &env) {
        for (int r = 0; r < kRounds; ++r) {
            SendBatch batch;
            batch.post(env, kProtoSizes[r / 2], 100 * r + 1, kTag);
            batch.post(env, kProtoSizes[r / 2], 100 * r + 2, kTag);
            ASSERT_TRUE(env.barrier());
            batch.wait(env);
            ASSERT_TRUE(env.barrier());
        }
    });
}

/* A message taken by a matched probe, received into a smaller buffer. */
TEST_P(TagExt, MatchedProbeTruncated)
{
    const size_t kBufLen[] = {10, 1000, 4096};
    const int    kCases    = sizeof(kProtoSizes) / sizeof(kProtoSizes[0]);

    Run([&](Env &env) {
        ASSERT_TRUE(env.barrier());
        for (int i = 0; i < kCases; ++i) {
            axon_tag_recv_info_t info = {0, 0};
            axon_tag_message_h   msg  = nullptr;
            GuardedBuf           buf(kBufLen[i]);

            ASSERT_EQ(AXON_OK, probe_wait(env, 50 + i, AXON_TAG_MASK_FULL, 1, &info, &msg));
            EXPECT_EQ(kProtoSizes[i], info.length);
            info = {0, 0};
            EXPECT_EQ(AXON_ERR_MSG_TRUNCATED, msg_recv(env, buf.data(), kBufLen[i], msg, &info))
                << "case " << i;
            EXPECT_EQ(kProtoSizes[i], info.length) << "case " << i;
            EXPECT_EQ((axon_tag_t)(50 + i), info.sender_tag);
            std::vector<uint8_t> full(kProtoSizes[i]);
            fill_msg(full.data(), full.size(), i);
            EXPECT_EQ(0, memcmp(full.data(), buf.data(), kBufLen[i])) << "case " << i;
            EXPECT_TRUE(buf.guard_intact()) << "case " << i << ": overrun past the buffer";
            /* The rest of the message does not leak into the next one. */
            uint8_t next[64];
            ASSERT_EQ(AXON_OK, env.recv(next, sizeof(next), 60 + i, AXON_TAG_MASK_FULL, &info));
            EXPECT_EQ(33u, info.length);
            EXPECT_EQ("", check_msg(next, 33, 1000 + i));
        }
    }, [&](Env &env) {
        SendBatch batch;
        for (int i = 0; i < kCases; ++i) {
            batch.post(env, kProtoSizes[i], i, 50 + i);
            batch.post(env, 33, 1000 + i, 60 + i);
        }
        ASSERT_TRUE(env.barrier());
        batch.wait(env);
    });
}

/* ---------------------------------------------------------------- cancel */

TEST_P(TagExt, CancelPostedReceive)
{
    const axon_tag_t kTag = 5, kOther = 6;

    Run([&](Env &env) {
        /* a, b, c with the tag (hashed), w with a wildcard; b and w are canceled. */
        const int            kRecvs = 5;
        CbRecord             rec[kRecvs];
        axon_request_h       req[kRecvs] = {};
        uint8_t              buf[kRecvs][64];
        enum { A, B, C, W, D };
        auto post = [&](int i, axon_tag_t tag, axon_tag_t mask) {
            axon_request_param_t param = {};
            param.cb.recv   = recv_cb;
            param.user_data = &rec[i];
            g_in_call = 1;
            axon_status_t st = axon_tag_recv_nb(env.worker, buf[i], sizeof(buf[i]), tag, mask,
                                                &param, &req[i]);
            g_in_call = 0;
            ASSERT_EQ(AXON_INPROGRESS, st) << "receive " << i;
        };
        post(A, kTag, AXON_TAG_MASK_FULL);
        post(B, kTag, AXON_TAG_MASK_FULL);
        post(C, kTag, AXON_TAG_MASK_FULL);
        post(W, 0, 0);
        for (int i : {B, W}) {
            g_in_call = 1;
            EXPECT_EQ(AXON_OK, axon_request_cancel(env.worker, req[i])) << "receive " << i;
            g_in_call = 0;
            EXPECT_EQ(0, rec[i].calls) << "callback from inside axon_request_cancel";
        }
        axon_test_progress_for(env.worker, 0.01);
        for (int i : {B, W}) {
            EXPECT_EQ(1, rec[i].calls) << "receive " << i;
            EXPECT_EQ(AXON_ERR_CANCELED, rec[i].status) << "receive " << i;
            EXPECT_EQ(0, rec[i].in_call);
            EXPECT_EQ(AXON_ERR_CANCELED, axon_request_test(req[i], NULL)) << "receive " << i;
        }
        EXPECT_EQ(0, rec[A].calls + rec[C].calls) << "a receive completed with nothing sent";
        /* Posted after the cancels: takes the third message. */
        post(D, kTag, AXON_TAG_MASK_FULL);
        ASSERT_TRUE(env.barrier());

        EXPECT_TRUE(env.progress_until([&] {
            return rec[A].calls && rec[C].calls && rec[D].calls;
        }));
        const int expect_seq[] = {1, -1, 2, -1, 3};
        for (int i : {A, C, D}) {
            EXPECT_EQ(AXON_OK, rec[i].status) << "receive " << i;
            EXPECT_EQ(20u, rec[i].length) << "receive " << i;
            EXPECT_EQ("", check_msg(buf[i], 20, expect_seq[i])) << "receive " << i;
        }
        /* The canceled wildcard did not take the message with the other tag. */
        axon_tag_recv_info_t info;
        uint8_t              other[64];
        ASSERT_EQ(AXON_OK, env.recv(other, sizeof(other), kOther, AXON_TAG_MASK_FULL, &info));
        EXPECT_EQ("", check_msg(other, 20, 4));
        axon_test_progress_for(env.worker, 0.02);
        for (int i = 0; i < kRecvs; ++i) {
            EXPECT_EQ(1, rec[i].calls) << "receive " << i << " called back more than once";
            axon_request_free(req[i]);
        }
    }, [&](Env &env) {
        uint8_t out[20];
        ASSERT_TRUE(env.barrier());
        const axon_tag_t tags[] = {kTag, kTag, kTag, kOther};
        for (int seq = 1; seq <= 4; ++seq) {
            fill_msg(out, sizeof(out), seq);
            ASSERT_EQ(AXON_OK, env.send(out, sizeof(out), tags[seq - 1])) << seq;
        }
    });
}

/*
 * A receive that already matched cannot be canceled: AXON_ERR_BUSY, and it
 * completes normally. Matched at post: a complete eager message, and a
 * rendezvous message whose data has yet to move; matched and completed.
 */
TEST_P(TagExt, CancelMatchedReceiveIsBusy)
{
    const size_t kSmall = 64;

    Run([&](Env &env) {
        const size_t lens[] = {kSmall, kRndvLen, kRndvLen};
        ASSERT_TRUE(env.barrier());
        for (int i = 0; i < 3; ++i) {
            axon_tag_recv_info_t info;
            axon_tag_message_h   msg = nullptr;
            GuardedBuf           buf(lens[i]);
            CbRecord             rec;
            axon_request_param_t param = {};
            axon_request_h       req   = nullptr;

            param.flags     = AXON_REQ_FLAG_NO_IMM_CMPL;
            param.cb.recv   = recv_cb;
            param.user_data = &rec;
            if (i < 2) {
                /* The message (or its request to send) is here: the receive matches at post. */
                ASSERT_EQ(AXON_OK, probe_wait(env, 30 + i, AXON_TAG_MASK_FULL, 0, &info, &msg));
            }
            ASSERT_EQ(AXON_INPROGRESS, axon_tag_recv_nb(env.worker, buf.data(), lens[i], 30 + i,
                                                        AXON_TAG_MASK_FULL, &param, &req));
            if (i == 2) {
                EXPECT_TRUE(env.progress_until([&] { return rec.calls > 0; }));
            }
            EXPECT_EQ(AXON_ERR_BUSY, axon_request_cancel(env.worker, req)) << "case " << i;
            EXPECT_TRUE(env.progress_until([&] { return rec.calls > 0; })) << "case " << i;
            axon_test_progress_for(env.worker, 0.01);
            EXPECT_EQ(1, rec.calls) << "case " << i;
            EXPECT_EQ(AXON_OK, rec.status) << "case " << i;
            EXPECT_EQ(AXON_OK, axon_request_test(req, NULL)) << "case " << i;
            EXPECT_EQ(lens[i], rec.length);
            EXPECT_EQ("", check_msg(buf.data(), lens[i], i)) << "case " << i;
            EXPECT_TRUE(buf.guard_intact());
            axon_request_free(req);
        }
    }, [&](Env &env) {
        SendBatch batch;
        batch.post(env, kSmall, 0, 30);
        batch.post(env, kRndvLen, 1, 31);
        batch.post(env, kRndvLen, 2, 32);
        ASSERT_TRUE(env.barrier());
        batch.wait(env);
    });
}

TEST_P(TagExt, CancelSendUnsupported)
{
    Run([&](Env &env) {
        std::vector<uint8_t> buf(kRndvLen);
        axon_tag_recv_info_t info;
        ASSERT_TRUE(env.barrier());
        ASSERT_EQ(AXON_OK, env.recv(buf.data(), kRndvLen, 41, AXON_TAG_MASK_FULL, &info));
        EXPECT_EQ("", check_msg(buf.data(), kRndvLen, 1));
        ASSERT_EQ(AXON_OK, env.recv(buf.data(), 64, 40, AXON_TAG_MASK_FULL, &info));
        EXPECT_EQ("", check_msg(buf.data(), 64, 0));
    }, [&](Env &env) {
        const size_t         lens[] = {64, kRndvLen};
        std::vector<uint8_t> bufs[2];
        axon_request_h       req[2];
        CbRecord             rec[2];
        for (int i = 0; i < 2; ++i) {
            axon_request_param_t param = {};
            bufs[i].resize(lens[i]);
            fill_msg(bufs[i].data(), lens[i], i);
            param.flags     = AXON_REQ_FLAG_NO_IMM_CMPL;
            param.cb.send   = send_cb;
            param.user_data = &rec[i];
            ASSERT_EQ(AXON_INPROGRESS, axon_tag_send_nb(env.ep(), bufs[i].data(), lens[i],
                                                        40 + i, &param, &req[i]));
            EXPECT_EQ(AXON_ERR_UNSUPPORTED, axon_request_cancel(env.worker, req[i])) << i;
        }
        ASSERT_TRUE(env.barrier());
        for (int i = 0; i < 2; ++i) {
            EXPECT_TRUE(env.progress_until([&] { return rec[i].calls > 0; })) << i;
            EXPECT_EQ(AXON_OK, rec[i].status) << i;
            EXPECT_EQ(AXON_OK, axon_request_test(req[i], NULL)) << i;
            axon_request_free(req[i]);
        }
        axon_test_progress_for(env.worker, 0.01);
        EXPECT_EQ(1, rec[0].calls);
        EXPECT_EQ(1, rec[1].calls);
    });
}

/* ---------------------------------------------------------------- synchronous send */

const size_t kSyncSizes[] = {0, 64, 20000, kRndvLen};
const int    kSyncCount   = sizeof(kSyncSizes) / sizeof(kSyncSizes[0]);

/*
 * A synchronous send is not done while the receiver, progressing all along,
 * has posted no receive that matches (only one with another tag); it is
 * done once one is posted. Then the other way: receive posted first.
 */
TEST_P(TagExt, SyncSendWaitsForMatch)
{
    const double     kWatch  = 0.3;  /* how long the sender watches it stay in flight */
    const axon_tag_t kUnused = 0x999;

    Run([&](Env &env) {
        uint8_t              unused[8];
        axon_tag_recv_info_t info;
        axon_request_param_t param = {};
        axon_request_h       unused_req = nullptr;
        param.recv_info = &info;
        axon_status_t unused_st = axon_tag_recv_nb(env.worker, unused, sizeof(unused), kUnused,
                                                   AXON_TAG_MASK_FULL, &param, &unused_req);
        ASSERT_EQ(AXON_INPROGRESS, unused_st);
        for (int i = 0; i < kSyncCount; ++i) {
            GuardedBuf buf(kSyncSizes[i]);
            ASSERT_TRUE(env.barrier());
            axon_test_progress_for(env.worker, kWatch + 0.05);
            ASSERT_TRUE(env.barrier());
            ASSERT_EQ(AXON_OK, env.recv(buf.data(), kSyncSizes[i], 0x900 + i, AXON_TAG_MASK_FULL,
                                        &info)) << "size " << kSyncSizes[i];
            EXPECT_EQ(kSyncSizes[i], info.length);
            EXPECT_EQ("", check_msg(buf.data(), kSyncSizes[i], i));
            EXPECT_TRUE(buf.guard_intact());
        }
        /* Posted first. */
        for (int i = 0; i < kSyncCount; ++i) {
            GuardedBuf           buf(kSyncSizes[i]);
            axon_request_h       req = nullptr;
            axon_request_param_t p2  = {};
            p2.recv_info = &info;
            axon_status_t st = axon_tag_recv_nb(env.worker, buf.data(), kSyncSizes[i],
                                                0xA00 + i, AXON_TAG_MASK_FULL, &p2, &req);
            ASSERT_TRUE(env.barrier());
            ASSERT_EQ(AXON_OK, env.wait(st, req, &info)) << "size " << kSyncSizes[i];
            EXPECT_EQ("", check_msg(buf.data(), kSyncSizes[i], 10 + i));
        }
        EXPECT_EQ(AXON_OK, env.wait(unused_st, unused_req, &info));
        EXPECT_EQ(0u, info.length);
    }, [&](Env &env) {
        for (int i = 0; i < kSyncCount; ++i) {
            std::vector<uint8_t> out(kSyncSizes[i]);
            CbRecord             rec;
            axon_request_param_t param = {};
            axon_request_h       req   = nullptr;
            fill_msg(out.data(), out.size(), i);
            param.cb.send   = send_cb;
            param.user_data = &rec;
            g_in_call = 1;
            axon_status_t st = axon_tag_send_sync_nb(env.ep(), out.data(), out.size(), 0x900 + i,
                                                     &param, &req);
            g_in_call = 0;
            ASSERT_EQ(AXON_INPROGRESS, st) << "size " << kSyncSizes[i]
                                           << ": done before the receiver posted anything";
            ASSERT_TRUE(env.barrier());
            double end = axon_test_time() + kWatch;
            while (axon_test_time() < end) {
                env.progress();
                ASSERT_EQ(AXON_INPROGRESS, axon_request_test(req, NULL))
                    << "size " << kSyncSizes[i] << ": completed with no matching receive";
                ASSERT_EQ(0, rec.calls);
            }
            ASSERT_TRUE(env.barrier());
            EXPECT_EQ(AXON_OK, env.wait(st, req, NULL)) << "size " << kSyncSizes[i];
            EXPECT_EQ(1, rec.calls);
            EXPECT_EQ(0, rec.in_call);
            EXPECT_EQ(AXON_OK, rec.status);
        }
        for (int i = 0; i < kSyncCount; ++i) {
            std::vector<uint8_t> out(kSyncSizes[i]);
            axon_request_h       req = nullptr;
            fill_msg(out.data(), out.size(), 10 + i);
            ASSERT_TRUE(env.barrier());
            axon_status_t st = axon_tag_send_sync_nb(env.ep(), out.data(), out.size(), 0xA00 + i,
                                                     NULL, &req);
            ASSERT_TRUE((st == AXON_OK) || (st == AXON_INPROGRESS)) << axon_status_string(st);
            EXPECT_EQ(AXON_OK, env.wait(st, req, NULL)) << "size " << kSyncSizes[i];
        }
        ASSERT_EQ(AXON_OK, env.send(NULL, 0, kUnused));
    });
}

/*
 * A synchronous send matched by a removing probe: not done before the probe,
 * done once the probed message is received (a removing probe matches, as
 * MPI_Improbe does; the receive of it finishes the rendezvous ones).
 */
TEST_P(TagExt, SyncSendMatchedByRemovingProbe)
{
    Run([&](Env &env) {
        for (int i = 0; i < kSyncCount; ++i) {
            axon_tag_recv_info_t info = {0, 0};
            axon_tag_message_h   msg  = nullptr;
            GuardedBuf           buf(kSyncSizes[i]);
            ASSERT_TRUE(env.barrier());  /* the sender checked it is in flight */
            ASSERT_EQ(AXON_OK, probe_wait(env, 0xC00 + i, AXON_TAG_MASK_FULL, 1, &info, &msg));
            EXPECT_EQ(kSyncSizes[i], info.length);
            ASSERT_EQ(AXON_OK, msg_recv(env, buf.data(), kSyncSizes[i], msg, &info));
            EXPECT_EQ("", check_msg(buf.data(), kSyncSizes[i], 20 + i));
            EXPECT_TRUE(buf.guard_intact());
            ASSERT_TRUE(env.barrier());
        }
    }, [&](Env &env) {
        for (int i = 0; i < kSyncCount; ++i) {
            std::vector<uint8_t> out(kSyncSizes[i]);
            axon_request_h       req = nullptr;
            fill_msg(out.data(), out.size(), 20 + i);
            axon_status_t st = axon_tag_send_sync_nb(env.ep(), out.data(), out.size(), 0xC00 + i,
                                                     NULL, &req);
            ASSERT_EQ(AXON_INPROGRESS, st) << "size " << kSyncSizes[i];
            axon_test_progress_for(env.worker, 0.05);
            EXPECT_EQ(AXON_INPROGRESS, axon_request_test(req, NULL))
                << "size " << kSyncSizes[i] << ": done before any probe";
            ASSERT_TRUE(env.barrier());
            EXPECT_EQ(AXON_OK, env.wait(st, req, NULL)) << "size " << kSyncSizes[i];
            ASSERT_TRUE(env.barrier());
        }
    });
}

/*
 * A synchronous send of many fragments (eager: rendezvous off) to a receive
 * posted first: the receiver matches it on its first fragment and acks while
 * the rest still waits on the sender's queue. The send must not complete
 * before its last fragment left, so the caller may overwrite its buffer in
 * the completion callback (and free the request there) without the receiver
 * seeing a byte of it. Completing on the ack alone sent the rest from a
 * request back in the pool and the overwritten buffer (found by axon_soak).
 */
TEST_P(TagExt, SyncSendOfFragmentsKeepsBufferUntilLastLeaves)
{
    const size_t     kLen   = (size_t)2 << 20;
    const int        kTimes = 4;
    const axon_tag_t kTag   = 0xD00;
    struct Reuse {
        std::vector<uint8_t> *out;
        int                   calls;
        axon_status_t         status;
    };
    auto reuse_cb = [](axon_request_h req, axon_status_t status, void *arg) {
        Reuse *r = static_cast<Reuse *>(arg);
        std::fill(r->out->begin(), r->out->end(), (uint8_t)0xEE);
        r->calls++;
        r->status = status;
        axon_request_free(req);
    };

    Run([&](Env &env) {
        for (int i = 0; i < kTimes; ++i) {
            GuardedBuf           buf(kLen);
            axon_tag_recv_info_t info;
            axon_request_param_t param = {};
            axon_request_h       req   = nullptr;
            param.recv_info = &info;
            axon_status_t st = axon_tag_recv_nb(env.worker, buf.data(), kLen, kTag + i,
                                                AXON_TAG_MASK_FULL, &param, &req);
            ASSERT_TRUE(env.barrier());
            ASSERT_EQ(AXON_OK, env.wait(st, req, &info)) << "round " << i;
            EXPECT_EQ(kLen, info.length);
            EXPECT_EQ("", check_msg(buf.data(), kLen, 30 + i)) << "round " << i;
            EXPECT_TRUE(buf.guard_intact());
            ASSERT_TRUE(env.barrier());
        }
    }, [&](Env &env) {
        for (int i = 0; i < kTimes; ++i) {
            std::vector<uint8_t> out(kLen);
            Reuse                rec   = {&out, 0, AXON_INPROGRESS};
            axon_request_param_t param = {};
            axon_request_h       req   = nullptr;
            fill_msg(out.data(), out.size(), 30 + i);
            param.flags     = AXON_REQ_FLAG_NO_IMM_CMPL;
            param.cb.send   = reuse_cb;
            param.user_data = &rec;
            ASSERT_TRUE(env.barrier());  /* the receive is posted */
            ASSERT_EQ(AXON_INPROGRESS, axon_tag_send_sync_nb(env.ep(), out.data(), kLen,
                                                             kTag + i, &param, &req));
            ASSERT_TRUE(env.progress_until([&] { return rec.calls > 0; })) << "round " << i;
            EXPECT_EQ(AXON_OK, rec.status);
            ASSERT_TRUE(env.barrier());  /* the receiver checked the data */
            EXPECT_EQ(1, rec.calls);
        }
    }, {{"RNDV_THRESH", "inf"}});
}

/* ---------------------------------------------------------------- large */

/*
 * Both ranks send 64 MiB (and a bit) to each other at once, from and into
 * buffers that are not page aligned; once with the receives posted first,
 * once with the messages arriving first.
 */
/*
 * AXON_REQ_FLAG_INJECT (libfabric's inject): the sender's buffer may be
 * reused as soon as the call returns. The receiver does not progress while
 * the sender posts 300 messages of every protocol size from one buffer it
 * overwrites after each call, so the ring fills and sends queue; every
 * message still arrives as it was when its call was made.
 */
TEST_P(TagExt, InjectBufferReusableAtReturn)
{
    const size_t kSizes[] = {8, 100, 3000, 20000, kRndvLen};
    const unsigned kCount = 300;

    Run([&](Env &env) {
        std::vector<uint8_t> buf(kRndvLen);

        ASSERT_TRUE(env.barrier_no_progress());   /* the sender posts everything first */
        for (unsigned k = 0; k < kCount; ++k) {
            size_t len = kSizes[k % (sizeof(kSizes) / sizeof(kSizes[0]))];
            axon_tag_recv_info_t info = {};

            ASSERT_EQ(AXON_OK, env.recv(buf.data(), buf.size(), 0x700, AXON_TAG_MASK_FULL,
                                        &info)) << "message " << k;
            ASSERT_EQ(len, info.length) << "message " << k;
            ASSERT_EQ("", check_msg(buf.data(), len, k)) << "message " << k << ", " << len
                                                         << " B";
        }
        ASSERT_TRUE(env.barrier());
    }, [&](Env &env) {
        std::vector<uint8_t> buf(kRndvLen);
        std::vector<axon_request_h> reqs;
        axon_request_param_t param = {};
        unsigned queued = 0;

        param.flags = AXON_REQ_FLAG_INJECT;
        for (unsigned k = 0; k < kCount; ++k) {
            size_t len = kSizes[k % (sizeof(kSizes) / sizeof(kSizes[0]))];
            axon_request_h req = nullptr;

            fill_msg(buf.data(), len, k);
            axon_status_t st = axon_tag_send_nb(env.ep(), buf.data(), len, 0x700, &param, &req);
            ASSERT_TRUE((st == AXON_OK) || (st == AXON_INPROGRESS)) << axon_status_string(st);
            memset(buf.data(), 0xee, len);   /* the call returned: the buffer is ours */
            if (st == AXON_INPROGRESS) {
                reqs.push_back(req);
                ++queued;
            }
        }
        EXPECT_GT(queued, 0u) << "no send had to wait: the test proves nothing";
        ASSERT_TRUE(env.barrier_no_progress());
        for (axon_request_h req : reqs) {
            EXPECT_EQ(AXON_OK, env.wait(AXON_INPROGRESS, req, nullptr));
        }
        ASSERT_TRUE(env.barrier());
    });
}

/* Slow: a long transfer, not for the sanitizer passes (tests/README.md). */
class TagExtSlow : public TagExt {};

TEST_P(TagExtSlow, Large64MiBBothWays)
{
    const size_t kLen = ((size_t)64 << 20) + 13;

    auto role = [&](Env &env) {
        std::vector<uint8_t> out(kLen + 3);
        GuardedBuf           in(kLen + 5);
        int                  peer = 1 - env.rank;

        for (int round = 0; round < 2; ++round) {
            axon_tag_recv_info_t info;
            axon_request_param_t param = {};
            axon_request_h       rreq = nullptr, sreq = nullptr;
            axon_status_t        rst = AXON_INPROGRESS, sst;

            fill_msg(out.data() + 3, kLen, 10 * env.rank + round);
            in.reset();
            param.recv_info = &info;
            if (round == 0) {
                rst = axon_tag_recv_nb(env.worker, in.data() + 5, kLen, 0xB0 + peer,
                                       AXON_TAG_MASK_FULL, &param, &rreq);
                ASSERT_TRUE(env.barrier());
            }
            sst = axon_tag_send_nb(env.ep(), out.data() + 3, kLen, 0xB0 + env.rank, NULL, &sreq);
            ASSERT_TRUE((sst == AXON_OK) || (sst == AXON_INPROGRESS));
            if (round == 1) {
                ASSERT_TRUE(env.barrier());
                axon_test_progress_for(env.worker, 0.01);
                rst = axon_tag_recv_nb(env.worker, in.data() + 5, kLen, 0xB0 + peer,
                                       AXON_TAG_MASK_FULL, &param, &rreq);
            }
            ASSERT_EQ(AXON_OK, env.wait(rst, rreq, &info)) << "round " << round;
            EXPECT_EQ(AXON_OK, env.wait(sst, sreq, NULL)) << "round " << round;
            EXPECT_EQ(kLen, info.length);
            EXPECT_EQ("", check_msg(in.data() + 5, kLen, 10 * peer + round)) << "round " << round;
            EXPECT_TRUE(in.guard_intact());
            for (int i = 0; i < 5; ++i) {
                EXPECT_EQ(GuardedBuf::kFill, in.data()[i]) << "written before the buffer";
            }
        }
    };
    Run(role, role);
}

const TransportParam kExtTransports[] = {
    {"self", "self", 1},
    {"shm", "shm", 1},
    {"tcp", "tcp", 1},
    {"tcp_rndv", "tcp", 1, false, {{"RNDV_THRESH", "16K"}}},
    {"rc", "rc", 1},
    {"ud", "ud", 1},
    {"dc", "dc", 1},
};
const TransportParam kExtVariants[] = {
    {"shm_nocma", "shm", 1, false, {{"RNDV_THRESH", "16K"}, {"SHM_CMA", "n"}}},
    {"rc_rndv", "rc", 1, false, {{"RNDV_THRESH", "16K"}}},
    {"ud_rndv", "ud", 1, false, {{"RNDV_THRESH", "16K"}}},
    {"dc_rndv", "dc", 1, false, {{"RNDV_THRESH", "16K"}}},
};

INSTANTIATE_TEST_SUITE_P(Lanes, TagExt, ::testing::ValuesIn(kExtTransports), transport_name);
INSTANTIATE_TEST_SUITE_P(Variants, TagExt, ::testing::ValuesIn(kExtVariants), transport_name);
INSTANTIATE_TEST_SUITE_P(Lanes, TagExtSlow, ::testing::ValuesIn(kExtTransports), transport_name);
INSTANTIATE_TEST_SUITE_P(Variants, TagExtSlow, ::testing::ValuesIn(kExtVariants), transport_name);

/* ---------------------------------------------------------------- many to one */

/*
 * kMtoSenders processes send kMtoMsgs messages each to one receiver, with
 * MPI's tag layout: the sender's rank in the high 32 bits, the user tag in
 * the low. The receiver takes most with any-source receives (a window of
 * them posted ahead) and some with the source named; it must get every
 * message once, in order per sender, intact.
 */
const int        kMtoSenders = 4;
const int        kMtoMsgs    = 2000;
const int        kMtoWindow  = 8;    /* receives posted ahead; also sends in flight */
const axon_tag_t kMtoUserTag = 0x77;
const axon_tag_t kMtoAnySrc  = 0xffffffffull;  /* mask: the user tag only */

axon_tag_t mto_tag(int rank)
{
    return ((axon_tag_t)rank << 32) | kMtoUserTag;
}

/* Eager shorts and fragments, rendezvous just over 16K and well above it. */
size_t mto_size(int seq)
{
    if (seq % 100 == 7) {
        return (300 << 10) + seq;
    }
    if (seq % 25 == 3) {
        return 20000 + seq;
    }
    if (seq % 10 == 1) {
        return 5000 + seq;
    }
    return 16 + (seq * 7) % 300;
}

const size_t kMtoMaxSize = (300 << 10) + kMtoMsgs;

/* Every message carries immediate data (libfabric's remote CQ data). */
uint32_t mto_imm(int rank, int seq)
{
    return ((uint32_t)rank << 24) | (uint32_t)seq;
}

/* Payload: [rank][seq][pattern seeded by seq, length and rank]. */
void mto_fill(uint8_t *buf, size_t len, int rank, int seq)
{
    axon_test_fill(buf, len, msg_seed(seq, len) + rank);
    memcpy(buf, &rank, sizeof(rank));
    memcpy(buf + sizeof(rank), &seq, sizeof(seq));
}

struct MtoArgs {
    const TransportParam          *param;
    std::vector<axon_config_kv_t>  config;
    int                            rank;  /* 1..kMtoSenders; the receiver is 0 */
};

int mto_sender_main(int fd, void *arg)
{
    MtoArgs           *a = static_cast<MtoArgs *>(arg);
    NodeGuard          ng;
    axon_test_node_t  &node = ng.node;
    axon_ep_h          ep   = nullptr;

    if (axon_test_node_create(&node, a->param->tls, a->config.data(), a->config.size()) !=
        AXON_OK) {
        return 2;
    }
    if (axon_test_connect_peer(fd, &node, &ep) != 0) {
        return 3;
    }
    if (axon_test_sync_progress(fd, node.worker, kOpTimeout) != 0) {
        return 4;
    }

    /* A window of sends in flight, each with its own buffer. */
    std::vector<std::vector<uint8_t>> bufs(kMtoWindow, std::vector<uint8_t>(kMtoMaxSize));
    std::vector<axon_request_h>       reqs(kMtoWindow, nullptr);
    std::vector<axon_status_t>        st(kMtoWindow, AXON_OK);
    for (int seq = 0; seq < kMtoMsgs + kMtoWindow; ++seq) {
        int slot = seq % kMtoWindow;
        if (seq >= kMtoWindow) {
            axon_status_t status = axon_test_wait_req(node.worker, st[slot], reqs[slot], NULL,
                                                      kOpTimeout);
            st[slot] = AXON_OK;
            if (status != AXON_OK) {
                fprintf(stderr, "sender %d: message %d: %s\n", a->rank, seq - kMtoWindow,
                        axon_status_string(status));
                return 5;
            }
        }
        if (seq < kMtoMsgs) {
            size_t               len   = mto_size(seq);
            axon_request_param_t param = {};
            param.flags    = AXON_REQ_FLAG_IMM_DATA;
            param.imm_data = mto_imm(a->rank, seq);
            mto_fill(bufs[slot].data(), len, a->rank, seq);
            st[slot] = axon_tag_send_nb(ep, bufs[slot].data(), len, mto_tag(a->rank), &param,
                                        &reqs[slot]);
            if ((st[slot] != AXON_OK) && (st[slot] != AXON_INPROGRESS)) {
                return 6;
            }
        }
    }
    if ((axon_test_ep_close(node.worker, ep, AXON_EP_CLOSE_FLUSH, kOpTimeout) != AXON_OK) ||
        (axon_test_sync_progress(fd, node.worker, kOpTimeout) != 0)) {
        return 7;
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

class TagManyToOneSlow : public ::testing::TestWithParam<TransportParam> {
};

TEST_P(TagManyToOneSlow, EveryMessageOnceInOrder)
{
    axon_test_peer_t              peers[kMtoSenders];
    MtoArgs                       args[kMtoSenders];
    PeerGuard                     peer_guard = {peers, 0};
    NodeGuard                     ng;
    axon_test_node_t             &node = ng.node;
    axon_ep_h                     eps[kMtoSenders] = {};
    std::vector<axon_config_kv_t> config = merge_config(GetParam(), {{"RNDV_THRESH", "16K"}});

    /* Fork before this process creates any Axon object. */
    for (int i = 0; i < kMtoSenders; ++i) {
        args[i] = {&GetParam(), config, i + 1};
        ASSERT_EQ(0, axon_test_peer_spawn(&peers[i], mto_sender_main, &args[i], kPeerTimeout));
        peer_guard.count = i + 1;
    }
    ASSERT_EQ(AXON_OK, axon_test_node_create(&node, GetParam().tls, config.data(),
                                             config.size()));
    /* Endpoints back to every sender, as an MPI rank has; they carry nothing here. */
    for (int i = 0; i < kMtoSenders; ++i) {
        void  *addr;
        size_t len;
        ASSERT_EQ(0, axon_test_exchange_address(peers[i].fd, node.address, node.address_length,
                                                &addr, &len));
        axon_status_t status = axon_test_ep_create(node.worker, addr, len, &eps[i]);
        free(addr);
        ASSERT_EQ(AXON_OK, status);
    }
    for (int i = 0; i < kMtoSenders; ++i) {
        ASSERT_EQ(0, axon_test_sync_progress(peers[i].fd, node.worker, kOpTimeout));
    }

    struct Slot {
        std::vector<uint8_t> buf = std::vector<uint8_t>(kMtoMaxSize);
        axon_request_h       req = nullptr;
        axon_status_t        st  = AXON_OK;
        axon_tag_recv_info_t info = {0, 0};
    };
    std::vector<Slot> window(kMtoWindow);
    size_t            head = 0, posted = 0, done = 0;
    const size_t      total = (size_t)kMtoSenders * kMtoMsgs;
    int               next[kMtoSenders + 1] = {0};
    int               bad = 0;
    double            deadline = axon_test_time() + kRunTimeout;

    auto timeout = [&] {
        double left = deadline - axon_test_time();
        return left > 0.001 ? left : 0.001;
    };
    /* Check one received message against what its sender must have sent next. */
    auto check = [&](axon_status_t status, const uint8_t *buf, const axon_tag_recv_info_t &info,
                     int want_rank) {
        int rank = -1, seq = -1;
        ++done;
        if (status != AXON_OK) {
            ADD_FAILURE() << "receive " << done << ": " << axon_status_string(status);
            ++bad;
            return;
        }
        if (info.length >= 8) {
            memcpy(&rank, buf, sizeof(rank));
            memcpy(&seq, buf + sizeof(rank), sizeof(seq));
        }
        if ((rank < 1) || (rank > kMtoSenders) || (info.sender_tag != mto_tag(rank)) ||
            ((want_rank > 0) && (rank != want_rank))) {
            ADD_FAILURE() << "receive " << done << ": rank " << rank << ", tag 0x" << std::hex
                          << info.sender_tag << std::dec << ", wanted rank " << want_rank;
            ++bad;
            return;
        }
        if (seq != next[rank]) {
            ADD_FAILURE() << "rank " << rank << ": message " << seq << " where " << next[rank]
                          << " was expected";
            ++bad;
        }
        next[rank] = seq + 1;
        if (info.length != mto_size(seq)) {
            ADD_FAILURE() << "rank " << rank << " message " << seq << ": length " << info.length;
            ++bad;
            return;
        }
        if ((info.sender_id != axon_ep_peer_id(eps[rank - 1])) ||
            !(info.flags & AXON_TAG_INFO_IMM_DATA) || (info.imm_data != mto_imm(rank, seq))) {
            ADD_FAILURE() << "rank " << rank << " message " << seq << ": sender id 0x" << std::hex
                          << info.sender_id << " imm 0x" << info.imm_data << " flags "
                          << info.flags;
            ++bad;
        }
        std::vector<uint8_t> expect(info.length);
        mto_fill(expect.data(), info.length, rank, seq);
        if (memcmp(expect.data(), buf, info.length) != 0) {
            ADD_FAILURE() << "rank " << rank << " message " << seq << ": payload corrupted";
            ++bad;
        }
    };
    auto post_any = [&]() {
        Slot                &s     = window[posted % kMtoWindow];
        axon_request_param_t param = {};
        param.recv_info = &s.info;
        s.st = axon_tag_recv_nb(node.worker, s.buf.data(), s.buf.size(), kMtoUserTag, kMtoAnySrc,
                                &param, &s.req);
        ++posted;
    };
    auto complete_oldest = [&]() {
        Slot         &s      = window[head % kMtoWindow];
        axon_status_t status = (s.st == AXON_INPROGRESS) ?
                               axon_test_wait_req(node.worker, s.st, s.req, &s.info, timeout()) :
                               s.st;
        ++head;
        check(status, s.buf.data(), s.info, 0);
    };

    for (int round = 0; (done < total) && (bad < 10); ++round) {
        if (round % 50 == 49) {
            /* Drain the window, then one receive naming each sender that has more:
             * by the tag's source bits, or (every other round) by its sender id. */
            while (head < posted) {
                complete_oldest();
            }
            for (int r = 1; (r <= kMtoSenders) && (done < total); ++r) {
                if (next[r] >= kMtoMsgs) {
                    continue;
                }
                Slot &s = window[0];
                axon_status_t status;
                if ((round / 50) % 2) {
                    axon_request_param_t param = {};
                    param.flags     = AXON_REQ_FLAG_SENDER;
                    param.sender_id = axon_ep_peer_id(eps[r - 1]);
                    param.recv_info = &s.info;
                    s.st   = axon_tag_recv_nb(node.worker, s.buf.data(), s.buf.size(),
                                              kMtoUserTag, kMtoAnySrc, &param, &s.req);
                    status = axon_test_wait_req(node.worker, s.st, s.req, &s.info, timeout());
                } else {
                    status = axon_test_recv(node.worker, s.buf.data(), s.buf.size(), mto_tag(r),
                                            AXON_TAG_MASK_FULL, &s.info, timeout());
                }
                check(status, s.buf.data(), s.info, r);
                ++posted;
                ++head;
            }
            continue;
        }
        while ((posted - head < (size_t)kMtoWindow) && (posted < total)) {
            post_any();
        }
        if (head < posted) {
            complete_oldest();
        }
    }
    while (head < posted) {
        complete_oldest();
    }
    for (int r = 1; r <= kMtoSenders; ++r) {
        EXPECT_EQ(kMtoMsgs, next[r]) << "rank " << r;
    }
    /* Nothing extra. */
    axon_test_progress_for(node.worker, 0.05);
    axon_tag_recv_info_t info;
    axon_tag_message_h   msg;
    EXPECT_EQ(AXON_ERR_NO_MESSAGE, axon_tag_probe_nb(node.worker, 0, 0, 0, &info, &msg));
    for (int i = 0; i < kMtoSenders; ++i) {
        EXPECT_EQ(AXON_OK, axon_test_ep_close(node.worker, eps[i], AXON_EP_CLOSE_FLUSH,
                                              kOpTimeout));
        eps[i] = nullptr;
    }
    for (int i = 0; i < kMtoSenders; ++i) {
        EXPECT_EQ(0, axon_test_sync_progress(peers[i].fd, node.worker, kOpTimeout));
    }
    for (int i = 0; i < kMtoSenders; ++i) {
        EXPECT_EQ(0, axon_test_peer_wait(&peers[i], kPeerTimeout)) << "sender " << i + 1;
    }
    destroy_node_checked(&node);
}

/* ---------------------------------------------------------------- one way */

/*
 * A receiver with no endpoint to its sender still gets rendezvous messages
 * and completes synchronous sends: whatever the protocol answers travels
 * without the application opening a connection back.
 */
struct OneWayArgs {
    const TransportParam          *param;
    std::vector<axon_config_kv_t>  config;
};

int one_way_sender_main(int fd, void *arg)
{
    OneWayArgs        *a = static_cast<OneWayArgs *>(arg);
    NodeGuard          ng;
    axon_test_node_t  &node = ng.node;
    axon_ep_h          ep   = nullptr;
    void              *peer_addr;
    size_t             peer_len;
    std::vector<uint8_t> big(kRndvLen);
    uint8_t              small[40];

    if ((axon_test_node_create(&node, a->param->tls, a->config.data(), a->config.size()) !=
         AXON_OK) ||
        (axon_test_exchange_address(fd, node.address, node.address_length, &peer_addr,
                                    &peer_len) != 0) ||
        (axon_test_ep_create(node.worker, peer_addr, peer_len, &ep) != AXON_OK)) {
        return 2;
    }
    free(peer_addr);
    fill_msg(small, sizeof(small), 1);
    fill_msg(big.data(), big.size(), 2);
    if ((axon_test_send(node.worker, ep, small, sizeof(small), 1, kOpTimeout) != AXON_OK) ||
        (axon_test_send(node.worker, ep, big.data(), big.size(), 2, kOpTimeout) != AXON_OK)) {
        return 3;
    }
    axon_request_h req = nullptr;
    fill_msg(small, sizeof(small), 3);
    axon_status_t st = axon_tag_send_sync_nb(ep, small, sizeof(small), 3, NULL, &req);
    if (axon_test_wait_req(node.worker, st, req, NULL, kOpTimeout) != AXON_OK) {
        return 4;
    }
    if ((axon_test_ep_close(node.worker, ep, AXON_EP_CLOSE_FLUSH, kOpTimeout) != AXON_OK) ||
        (axon_test_sync_progress(fd, node.worker, kOpTimeout) != 0)) {
        return 5;
    }
    return 0;
}

class TagOneWay : public ::testing::TestWithParam<TransportParam> {
};

TEST_P(TagOneWay, RndvAndSyncWithoutEndpointBack)
{
    OneWayArgs       args = {&GetParam(), merge_config(GetParam(), {})};
    axon_test_peer_t peer;
    PeerGuard        peer_guard = {&peer, 1};
    NodeGuard        ng;
    void            *addr;
    size_t           len;

    ASSERT_EQ(0, axon_test_peer_spawn(&peer, one_way_sender_main, &args, kPeerTimeout));
    ASSERT_EQ(AXON_OK, axon_test_node_create(&ng.node, GetParam().tls, args.config.data(),
                                             args.config.size()));
    ASSERT_EQ(0, axon_test_exchange_address(peer.fd, ng.node.address, ng.node.address_length,
                                            &addr, &len));
    free(addr);  /* receive only: no endpoint back */

    std::vector<uint8_t> buf(kRndvLen);
    axon_tag_recv_info_t info;
    for (int seq = 1; seq <= 3; ++seq) {
        ASSERT_EQ(AXON_OK, axon_test_recv(ng.node.worker, buf.data(), buf.size(), seq,
                                          AXON_TAG_MASK_FULL, &info, kOpTimeout)) << seq;
        EXPECT_EQ(seq == 2 ? kRndvLen : 40u, info.length);
        EXPECT_EQ("", check_msg(buf.data(), info.length, seq));
    }
    EXPECT_EQ(0, axon_test_sync_progress(peer.fd, ng.node.worker, kOpTimeout));
    EXPECT_EQ(0, axon_test_peer_wait(&peer, kPeerTimeout)) << "the sender failed";
    destroy_node_checked(&ng.node);
}

const TransportParam kProcessTransports[] = {
    {"shm", "shm", 1},
    {"tcp", "tcp", 1},
    {"rc", "rc", 1},
    {"ud", "ud", 1},
    {"dc", "dc", 1},
};
const TransportParam kProcessVariants[] = {
    {"shm_nocma", "shm", 1, false, {{"SHM_CMA", "n"}}},
};

INSTANTIATE_TEST_SUITE_P(Lanes, TagManyToOneSlow, ::testing::ValuesIn(kProcessTransports),
                         transport_name);
INSTANTIATE_TEST_SUITE_P(Variants, TagManyToOneSlow, ::testing::ValuesIn(kProcessVariants),
                         transport_name);
INSTANTIATE_TEST_SUITE_P(Lanes, TagOneWay, ::testing::ValuesIn(kProcessTransports), transport_name);
INSTANTIATE_TEST_SUITE_P(Variants, TagOneWay, ::testing::ValuesIn(kProcessVariants),
                         transport_name);

}  // namespace
