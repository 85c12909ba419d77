/*
 * Members of a team as processes (the other suites run them all in one,
 * coll_env.h): the test process forks the members, gathers their worker
 * addresses and sends every member the whole list; each member then opens
 * endpoints to the others and joins the team. A member here is one
 * process's node, endpoints and team, torn down on every way out.
 */
#ifndef AXON_TEST_COLL_PROC_H
#define AXON_TEST_COLL_PROC_H

#include <poll.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "coll_env.h"

namespace {

const double kProcOpTimeout = 30.0;  /* one team creation or one collective */

/* A blob from fd while progressing worker; false on timeout or a closed socket. */
inline bool wait_note(int fd, axon_worker_h worker, double timeout, std::string *note = nullptr)
{
    double end = axon_test_time() + timeout;
    while (axon_test_time() < end) {
        struct pollfd pfd = {fd, POLLIN, 0};
        axon_test_progress(worker);
        if (poll(&pfd, 1, 0) > 0) {
            void  *blob;
            size_t len;
            if (axon_test_recv_blob(fd, &blob, &len) != 0) {
                return false;
            }
            if (note != nullptr) {
                note->assign(static_cast<char *>(blob), len);
            }
            free(blob);
            return true;
        }
    }
    return false;
}

/* One blob from fd (no worker to progress); false on error or timeout. */
inline bool recv_note(int fd, std::string *note)
{
    void  *blob;
    size_t len;
    if (axon_test_recv_blob(fd, &blob, &len) != 0) {
        return false;
    }
    note->assign(static_cast<char *>(blob), len);
    free(blob);
    return true;
}

/*
 * The test process's side of the address exchange: (*addrs)[r] from every
 * peer r that has a socket (the others filled in by the caller), then the
 * whole list to each of them. An empty string, or what failed.
 */
inline std::string share_addresses(const std::vector<axon_test_peer_t> &peers,
                                   std::vector<std::string>            *addrs)
{
    for (size_t r = 0; r < peers.size(); ++r) {
        if ((peers[r].fd >= 0) && !recv_note(peers[r].fd, &(*addrs)[r])) {
            return "no address from member " + std::to_string(r);
        }
    }
    for (size_t r = 0; r < peers.size(); ++r) {
        for (const std::string &a : *addrs) {
            if ((peers[r].fd >= 0) && (axon_test_send_blob(peers[r].fd, a.data(), a.size()) != 0)) {
                return "cannot send the addresses to member " + std::to_string(r);
            }
        }
    }
    return "";
}

/* One member: node, endpoints to the others, team; torn down on every way out. */
struct Member {
    axon_test_node_t       node = {};
    std::vector<axon_ep_h> eps;
    axon_team_h            team = nullptr;
    axon_coll_h            coll = nullptr;  /* one still running, if any */

    Member() {}
    Member(const Member &) = delete;
    Member &operator=(const Member &) = delete;

    ~Member()
    {
        if (coll != nullptr) {
            axon_coll_free(coll);
        }
        if (team != nullptr) {
            axon_team_destroy(team);
        }
        close_eps();
        if (node.context != nullptr) {
            axon_test_node_destroy(&node);
        }
    }

    void close_eps(unsigned mode = AXON_EP_CLOSE_FORCE, double timeout = 5.0)
    {
        for (axon_ep_h ep : eps) {
            if (ep != nullptr) {
                axon_test_ep_close(node.worker, ep, mode, timeout);
            }
        }
        eps.clear();
    }

    axon_status_t create(const char *tls, const axon_config_kv_t *extra, size_t count)
    {
        std::vector<axon_config_kv_t> kv;
        for (size_t i = 0; i < count; ++i) {
            if (extra[i].name != NULL) {
                kv.push_back(extra[i]);
            }
        }
        return axon_test_node_create_features(&node, AXON_FEATURE_COLL, tls, kv.data(),
                                              kv.size());
    }

    /* A member process's side of the exchange: our address up, n addresses down. */
    bool exchange(int fd, uint32_t n, std::vector<std::string> *addrs)
    {
        if (axon_test_send_blob(fd, node.address, node.address_length) != 0) {
            return false;
        }
        addrs->assign(n, std::string());
        for (uint32_t j = 0; j < n; ++j) {
            if (!recv_note(fd, &(*addrs)[j])) {
                return false;
            }
        }
        return true;
    }

    /* Progress until the team is ready (or the deadline); its status. */
    axon_status_t wait_team(axon_team_h t)
    {
        double        end = axon_test_time() + kProcOpTimeout;
        axon_status_t st;
        while ((st = axon_team_create_test(t)) == AXON_INPROGRESS) {
            if (axon_test_time() > end) {
                return AXON_ERR_TIMED_OUT;
            }
            axon_test_progress(node.worker);
        }
        return st;
    }

    /* Endpoints to every address (but ours), then the team, ready. */
    axon_status_t join(const std::vector<std::string> &addrs, uint32_t rank)
    {
        eps.assign(addrs.size(), nullptr);
        for (uint32_t j = 0; j < addrs.size(); ++j) {
            if (j == rank) {
                continue;
            }
            axon_status_t st = axon_test_ep_create(node.worker, addrs[j].data(), addrs[j].size(),
                                                   &eps[j]);
            if (st != AXON_OK) {
                return st;
            }
        }
        axon_team_params_t params = {};
        params.field_mask = AXON_TEAM_PARAM_EPS | AXON_TEAM_PARAM_RANK;
        params.eps        = eps.data();
        params.size       = (uint32_t)addrs.size();
        params.rank       = rank;
        axon_status_t st  = axon_team_create_nb(node.worker, &params, &team);
        return (st == AXON_OK) ? wait_team(team) : st;
    }

    /* Init a on t, post, wait to the deadline and free; its status. */
    axon_status_t run_on(axon_team_h t, const axon_coll_args_t &a, double timeout)
    {
        axon_coll_h   c;
        axon_status_t st = axon_coll_init(t, &a, &c);
        if (st != AXON_OK) {
            return st;
        }
        st = axon_coll_post(c);
        double end = axon_test_time() + timeout;
        if ((st == AXON_OK) || (st == AXON_INPROGRESS)) {
            while (((st = axon_coll_test(c)) == AXON_INPROGRESS) && (axon_test_time() < end)) {
                axon_test_progress(node.worker);
            }
        }
        if (st == AXON_INPROGRESS) {
            if (coll == nullptr) {
                coll = c;  /* still running: freed (or leaked) at the end */
            }
            return AXON_ERR_TIMED_OUT;
        }
        axon_coll_free(c);
        return st;
    }

    /* An INT64 sum (where it reduces) of kind on the team. */
    axon_status_t run(axon_coll_type_t kind, void *src, void *dst, size_t count, double timeout)
    {
        axon_coll_args_t a = {};
        a.field_mask = AXON_COLL_ARG_OP;
        a.coll  = kind;
        a.src   = src;
        a.dst   = dst;
        a.count = count;
        a.dt    = AXON_DT_INT64;
        a.op    = AXON_OP_SUM;
        return run_on(team, a, timeout);
    }
};

}  // namespace

#endif
