/*
 * Every transport through its ops table (framework/component.h), two ifaces
 * of this process and an endpoint between them: an am_bcopy whose pack
 * callback claims more than the resource's max_bcopy is refused
 * (INVALID_PARAM, a log line with the size), takes nothing with it (more
 * refusals than the transport has send buffers or ring cells), and the
 * endpoint goes on: the messages after arrive, each once, in order, and a
 * refused one never reaches the receiver.
 */
#include <gtest/gtest.h>

#include <string.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "log_capture.h"

extern "C" {
#include "axon.h"
#include "component.h"
#include "harness.h"
#include "loader.h"
}

namespace {

const uint8_t kAm      = 3;
const double  kTimeout = 30.0;

/* One iface of the pair and what reached it. */
struct Side {
    axon_iface_t          *iface = nullptr;
    uint64_t               uuid  = 0;
    axon_am_handler_t      handlers[AXON_AM_ID_MAX] = {};
    std::vector<uint32_t>  got;   /* the seq of each message, in arrival order */
    size_t                 bad = 0;

    static void on_am(void *arg, const void *data, size_t length, unsigned)
    {
        Side *s = static_cast<Side *>(arg);
        uint32_t seq;
        if (length != sizeof(seq)) {
            ++s->bad;
            return;
        }
        memcpy(&seq, data, sizeof(seq));
        s->got.push_back(seq);
    }
};

/* A pack callback that writes its seq and claims the size it is given. */
struct PackArg {
    uint32_t seq;
    size_t   claim;
};

size_t pack_seq(void *dest, void *arg)
{
    const PackArg *a = static_cast<const PackArg *>(arg);
    memcpy(dest, &a->seq, sizeof(a->seq));
    return a->claim;
}

class ComponentAm : public ::testing::TestWithParam<const char *> {
protected:
    axon_component_set_t           set_ = {NULL, 0};
    const axon_loaded_component_t *lc_  = nullptr;
    axon_md_t                     *md_  = nullptr;
    Side                           a_, b_;
    axon_tl_ep_t                  *ep_  = nullptr;

    void TearDown() override
    {
        if (ep_ != nullptr) {
            a_.iface->ops->ep_destroy(ep_);
        }
        for (Side *s : {&a_, &b_}) {
            if (s->iface != nullptr) {
                s->iface->ops->iface_close(s->iface);
            }
        }
        if (md_ != nullptr) {
            md_->ops->md_close(md_);
        }
        axon_loader_unload_all(&set_);
    }

    void open(Side *s)
    {
        axon_iface_params_t params = {};
        s->uuid            = ((uint64_t)getpid() << 24) | (s == &a_ ? 1 : 2);
        s->handlers[kAm]   = Side::on_am;
        params.am_handlers = s->handlers;
        params.am_arg      = s;
        params.worker_uuid = s->uuid;
        params.md          = md_;
        ASSERT_EQ(AXON_OK, lc_->component->iface_open(&lc_->resources[0], lc_->config, &params,
                                                      &s->iface));
    }

    void progress()
    {
        a_.iface->ops->iface_progress(a_.iface);
        b_.iface->ops->iface_progress(b_.iface);
    }

    /* The transport loaded, two ifaces on its first resource, A's endpoint to B. */
    void start()
    {
        axon_config_names_t path = {NULL, 0};
        ASSERT_EQ(AXON_OK, axon_loader_load_all(&path, NULL, 0, NULL, 0, &set_));
        for (unsigned i = 0; i < set_.count; ++i) {
            if ((set_.comps[i].component != nullptr) && !strcmp(set_.comps[i].name, GetParam())) {
                lc_ = &set_.comps[i];
            }
        }
        if ((lc_ == nullptr) || (lc_->num_resources == 0) ||
            (lc_->component->iface_open == nullptr)) {
            GTEST_SKIP() << GetParam() << " has no resource here";
        }
        if ((lc_->component->md_open != nullptr) &&
            (lc_->component->md_open(&lc_->resources[0], lc_->config, &md_) != AXON_OK)) {
            md_ = nullptr;
            FAIL() << "md_open of " << lc_->resources[0].tl_name;
        }
        ASSERT_NO_FATAL_FAILURE(open(&a_));
        ASSERT_NO_FATAL_FAILURE(open(&b_));
        const axon_iface_ops_t *ops = b_.iface->ops;
        std::vector<uint8_t> addr(ops->dev_addr_len + ops->iface_addr_len);
        ASSERT_EQ(AXON_OK, ops->iface_get_address(b_.iface, addr.data(),
                                                  addr.data() + ops->dev_addr_len));
        ASSERT_EQ(AXON_OK, a_.iface->ops->ep_create(a_.iface, b_.uuid, addr.data(),
                                                    addr.data() + ops->dev_addr_len, &ep_));
    }

    /* An am_bcopy of seq whose pack claims claim bytes, retried while the transport is
     * busy or connecting (a full ring drains: shm's refusals take a cell each). */
    ssize_t bcopy(uint32_t seq, size_t claim)
    {
        PackArg arg = {seq, claim};
        double end  = axon_test_time() + kTimeout;
        ssize_t ret;
        while (((ret = a_.iface->ops->ep_am_bcopy(ep_, kAm, pack_seq, &arg)) ==
                (ssize_t)AXON_ERR_NO_RESOURCE) && (axon_test_time() < end)) {
            progress();
        }
        return ret;
    }

    void send(uint32_t seq)
    {
        ASSERT_EQ((ssize_t)sizeof(seq), bcopy(seq, sizeof(seq))) << "message " << seq;
    }

    void wait_for(size_t count)
    {
        double end = axon_test_time() + kTimeout;
        while ((b_.got.size() < count) && (axon_test_time() < end)) {
            progress();
        }
        ASSERT_EQ(count, b_.got.size());
    }
};

TEST_P(ComponentAm, OversizedBcopyIsRefusedAndTheEndpointGoesOn)
{
    ASSERT_NO_FATAL_FAILURE(start());
    const size_t max = lc_->resources[0].max_bcopy;
    uint32_t seq = 0;

    ASSERT_NO_FATAL_FAILURE(send(seq++));   /* connected, and the receiver took one */
    ASSERT_NO_FATAL_FAILURE(wait_for(1));
    {
        LogCapture log;
        /* more than any transport's send buffers or ring cells: each must go back */
        for (int i = 0; i < 600; ++i) {
            ASSERT_EQ((ssize_t)AXON_ERR_INVALID_PARAM, bcopy(1000000u + i, max + 1))
                << "refusal " << i;
            if ((i % 64) == 0) {
                progress();
            }
        }
        EXPECT_TRUE(log.any_contains("am_bcopy", (std::to_string(max + 1) + " bytes").c_str()))
            << "no log line names the size";
    }
    for (; seq < 50; ++seq) {
        ASSERT_NO_FATAL_FAILURE(send(seq));
    }
    ASSERT_NO_FATAL_FAILURE(wait_for(seq));
    for (int k = 0; k < 1000; ++k) {
        progress();   /* nothing refused may still arrive */
    }
    ASSERT_EQ(seq, b_.got.size());
    for (uint32_t i = 0; i < seq; ++i) {
        EXPECT_EQ(i, b_.got[i]) << "message " << i;
    }
    EXPECT_EQ(0u, b_.bad);
    EXPECT_EQ(AXON_OK, a_.iface->ops->ep_check(ep_));
}

INSTANTIATE_TEST_SUITE_P(Lanes, ComponentAm,
                         ::testing::Values("shm", "tcp", "rc", "ud", "dc", "ofi"),
                         [](const ::testing::TestParamInfo<const char *> &info) {
                             return std::string(info.param);
                         });

}  // namespace
