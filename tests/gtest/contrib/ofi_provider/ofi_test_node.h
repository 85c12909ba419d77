/*
 * What the tests of the libfabric provider "axon" share: libfabric opened
 * by hand (below), the Open MPI hints, a Node (one endpoint with its own
 * fabric, domain, AV and CQ), CQ waits and the two-endpoint fixtures.
 */
#ifndef AXON_TEST_OFI_NODE_H
#define AXON_TEST_OFI_NODE_H

#include <gtest/gtest.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include <dlfcn.h>

/*
 * libfabric is opened here, not linked into the test binary: Debian's
 * libfabric pulls in PSM libraries whose constructors install SIGSEGV
 * handlers, which would change the crash checks of every other suite
 * (components/ofi/ofi_lib.h does the same for the ofi component).
 */
struct FiLib {
    decltype(&::fi_getinfo)  getinfo  = nullptr;
    decltype(&::fi_freeinfo) freeinfo = nullptr;
    decltype(&::fi_dupinfo)  dupinfo  = nullptr;
    decltype(&::fi_fabric)   fabric   = nullptr;
    decltype(&::fi_strerror) strerror = nullptr;
};

inline const FiLib &fi_lib()
{
    static FiLib lib = [] {
        FiLib l;
        void *h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
        if (h != nullptr) {
            l.getinfo  = reinterpret_cast<decltype(l.getinfo)>(dlsym(h, "fi_getinfo"));
            l.freeinfo = reinterpret_cast<decltype(l.freeinfo)>(dlsym(h, "fi_freeinfo"));
            l.dupinfo  = reinterpret_cast<decltype(l.dupinfo)>(dlsym(h, "fi_dupinfo"));
            l.fabric   = reinterpret_cast<decltype(l.fabric)>(dlsym(h, "fi_fabric"));
            l.strerror = reinterpret_cast<decltype(l.strerror)>(dlsym(h, "fi_strerror"));
        }
        if (!l.getinfo || !l.freeinfo || !l.dupinfo || !l.fabric || !l.strerror) {
            fprintf(stderr, "cannot load libfabric.so.1: %s\n", dlerror());
            abort();
        }
        return l;
    }();
    return lib;
}

#define fi_getinfo  fi_lib().getinfo
#define fi_freeinfo fi_lib().freeinfo
#define fi_dupinfo  fi_lib().dupinfo
#define fi_fabric   fi_lib().fabric
#define fi_strerror fi_lib().strerror

namespace {

const double kTimeout = 20.0;   /* seconds for any one completion */

inline double now_sec()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct Watchdog {
    explicit Watchdog(unsigned sec) { alarm(sec); }
    ~Watchdog() { alarm(0); }
};

/* Point libfabric at the build's provider before its first call in this process. */
inline void use_build_provider()
{
    static bool done;
    if (!done) {
        setenv("FI_PROVIDER_PATH", AXON_TEST_BUILDDIR "/contrib/ofi_provider/.libs", 1);
        done = true;
    }
}

/*
 * A peer process for a two-process test: the pipe to the parent made, this build's
 * provider chosen, forked; the child (0) has 60 s before an alarm ends it. -1 if the pipe
 * or the fork failed.
 */
inline pid_t fork_peer(int to_parent[2])
{
    if (pipe(to_parent) != 0) {
        return -1;
    }
    use_build_provider();
    pid_t pid = fork();
    if (pid == 0) {
        alarm(60);
    }
    return pid;
}

/* The hints Open MPI 4.1's ofi MTL passes (full tag mode with remote CQ data). */
inline struct fi_info *ompi_hints(enum fi_av_type av_type = FI_AV_MAP)
{
    struct fi_info *hints = fi_dupinfo(NULL);  /* fi_allocinfo */

    hints->mode                        = FI_CONTEXT;
    hints->ep_attr->type               = FI_EP_RDM;
    hints->caps                        = FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE;
    hints->tx_attr->msg_order          = FI_ORDER_SAS;
    hints->rx_attr->msg_order          = FI_ORDER_SAS;
    hints->tx_attr->op_flags           = FI_COMPLETION;
    hints->rx_attr->op_flags           = FI_COMPLETION;
    hints->domain_attr->threading      = FI_THREAD_DOMAIN;
    hints->domain_attr->av_type        = av_type;
    hints->domain_attr->resource_mgmt  = FI_RM_ENABLED;
    hints->domain_attr->cq_data_size   = 4;
    hints->domain_attr->mr_mode        = FI_MR_LOCAL | FI_MR_ALLOCATED;
    hints->fabric_attr->prov_name      = strdup("axon");
    return hints;
}

inline int getinfo(struct fi_info *hints, struct fi_info **info)
{
    use_build_provider();
    return fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, info);
}

/*
 * One endpoint with its own fabric, domain, AV and CQ (and counters on
 * request). caps, when set, replace the Open MPI hints' capabilities.
 */
struct Node {
    struct fi_info    *info    = NULL;
    struct fid_fabric *fabric  = NULL;
    struct fid_domain *domain  = NULL;
    struct fid_av     *av      = NULL;
    struct fid_cq     *cq      = NULL;
    struct fid_cntr   *tx_cntr = NULL, *rx_cntr = NULL;
    struct fid_cntr   *wr_cntr = NULL, *rd_cntr = NULL;   /* FI_WRITE / FI_READ */
    struct fid_cntr   *rwr_cntr = NULL, *rrd_cntr = NULL; /* FI_REMOTE_WRITE / _READ */
    struct fid_ep     *ep      = NULL;
    uint64_t           caps     = 0;
    int                mr_mode  = -1;       /* >= 0: replaces the hints' mr_mode */
    bool               counters = false;
    bool               rma_counters = false;
    bool               remote_counters = false;   /* FI_RMA_EVENT's endpoint counters */
    bool               auto_progress = false;     /* data_progress FI_PROGRESS_AUTO */
    char               name[64] = {};
    size_t             namelen = sizeof(name);

    int open(enum fi_av_type av_type = FI_AV_MAP, enum fi_threading threading = FI_THREAD_DOMAIN)
    {
        return open_at(NULL, NULL, 0, av_type, threading);
    }

    /* fi_getinfo(node, service, flags) with Open MPI's hints, then the objects. */
    int open_at(const char *node, const char *service, uint64_t flags,
                enum fi_av_type av_type = FI_AV_MAP, enum fi_threading threading = FI_THREAD_DOMAIN)
    {
        struct fi_info *hints = ompi_hints(av_type);
        struct fi_cq_attr cq_attr;
        struct fi_av_attr av_attr;
        struct fi_cntr_attr cntr_attr;
        int ret;

        hints->domain_attr->threading = threading;
        if (caps != 0) hints->caps = caps;
        if (mr_mode >= 0) hints->domain_attr->mr_mode = mr_mode;
        if (auto_progress) hints->domain_attr->data_progress = FI_PROGRESS_AUTO;
        use_build_provider();
        ret = fi_getinfo(FI_VERSION(1, 17), node, service, flags, hints, &info);
        fi_freeinfo(hints);
        if (ret != 0) return ret;
        if ((ret = fi_fabric(info->fabric_attr, &fabric, NULL)) != 0) return ret;
        if ((ret = fi_domain(fabric, info, &domain, NULL)) != 0) return ret;
        if ((ret = fi_endpoint(domain, info, &ep, NULL)) != 0) return ret;
        memset(&cq_attr, 0, sizeof(cq_attr));
        cq_attr.format = FI_CQ_FORMAT_TAGGED;
        if ((ret = fi_cq_open(domain, &cq_attr, &cq, NULL)) != 0) return ret;
        memset(&av_attr, 0, sizeof(av_attr));
        av_attr.type = av_type;
        if ((ret = fi_av_open(domain, &av_attr, &av, NULL)) != 0) return ret;
        if ((ret = fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV)) != 0) return ret;
        if ((ret = fi_ep_bind(ep, &av->fid, 0)) != 0) return ret;
        if (counters) {
            memset(&cntr_attr, 0, sizeof(cntr_attr));
            cntr_attr.events = FI_CNTR_EVENTS_COMP;
            if ((ret = fi_cntr_open(domain, &cntr_attr, &tx_cntr, &tx_cntr)) != 0) return ret;
            if ((ret = fi_cntr_open(domain, &cntr_attr, &rx_cntr, &rx_cntr)) != 0) return ret;
            if ((ret = fi_ep_bind(ep, &tx_cntr->fid, FI_SEND)) != 0) return ret;
            if ((ret = fi_ep_bind(ep, &rx_cntr->fid, FI_RECV)) != 0) return ret;
        }
        if (rma_counters) {
            memset(&cntr_attr, 0, sizeof(cntr_attr));
            cntr_attr.events = FI_CNTR_EVENTS_COMP;
            if ((ret = fi_cntr_open(domain, &cntr_attr, &wr_cntr, &wr_cntr)) != 0) return ret;
            if ((ret = fi_cntr_open(domain, &cntr_attr, &rd_cntr, &rd_cntr)) != 0) return ret;
            if ((ret = fi_ep_bind(ep, &wr_cntr->fid, FI_WRITE)) != 0) return ret;
            if ((ret = fi_ep_bind(ep, &rd_cntr->fid, FI_READ)) != 0) return ret;
        }
        if (remote_counters) {
            memset(&cntr_attr, 0, sizeof(cntr_attr));
            cntr_attr.events = FI_CNTR_EVENTS_COMP;
            if ((ret = fi_cntr_open(domain, &cntr_attr, &rwr_cntr, &rwr_cntr)) != 0) return ret;
            if ((ret = fi_cntr_open(domain, &cntr_attr, &rrd_cntr, &rrd_cntr)) != 0) return ret;
            if ((ret = fi_ep_bind(ep, &rwr_cntr->fid, FI_REMOTE_WRITE)) != 0) return ret;
            if ((ret = fi_ep_bind(ep, &rrd_cntr->fid, FI_REMOTE_READ)) != 0) return ret;
        }
        if ((ret = fi_enable(ep)) != 0) return ret;
        return fi_getname(&ep->fid, name, &namelen);
    }

    /* A second endpoint in this domain, with a CQ of its own and this AV; enabled. */
    int open_second_ep(struct fid_ep **ep2, struct fid_cq **cq2)
    {
        struct fi_cq_attr cq_attr;
        int ret;

        memset(&cq_attr, 0, sizeof(cq_attr));
        cq_attr.format = FI_CQ_FORMAT_TAGGED;
        if ((ret = fi_endpoint(domain, info, ep2, NULL)) != 0) return ret;
        if ((ret = fi_cq_open(domain, &cq_attr, cq2, NULL)) != 0) return ret;
        if ((ret = fi_ep_bind(*ep2, &(*cq2)->fid, FI_TRANSMIT | FI_RECV)) != 0) return ret;
        if ((ret = fi_ep_bind(*ep2, &av->fid, 0)) != 0) return ret;
        return fi_enable(*ep2);
    }

    fi_addr_t insert(const void *addr)
    {
        fi_addr_t fa = FI_ADDR_NOTAVAIL;
        EXPECT_EQ(1, fi_av_insert(av, addr, 1, &fa, 0, NULL));
        return fa;
    }

    void close()
    {
        struct fid *fids[] = {ep ? &ep->fid : NULL, av ? &av->fid : NULL, cq ? &cq->fid : NULL,
                              tx_cntr ? &tx_cntr->fid : NULL, rx_cntr ? &rx_cntr->fid : NULL,
                              wr_cntr ? &wr_cntr->fid : NULL, rd_cntr ? &rd_cntr->fid : NULL,
                              rwr_cntr ? &rwr_cntr->fid : NULL, rrd_cntr ? &rrd_cntr->fid : NULL,
                              domain ? &domain->fid : NULL, fabric ? &fabric->fid : NULL};
        for (struct fid *f : fids) {
            if (f != NULL) {
                EXPECT_EQ(0, fi_close(f)) << "class " << f->fclass;
            }
        }
        if (info) {
            fi_freeinfo(info);
        }
        ep = NULL; av = NULL; cq = NULL; domain = NULL; fabric = NULL; info = NULL;
        tx_cntr = NULL; rx_cntr = NULL; wr_cntr = NULL; rd_cntr = NULL;
        rwr_cntr = NULL; rrd_cntr = NULL;
    }

    ~Node() { close(); }
};

/*
 * Read one entry from node's CQ, progressing the others meanwhile. Returns
 * 1 with *entry, -FI_EAVAIL with *err filled, or -FI_EAGAIN on timeout.
 */
inline ssize_t wait_cq(Node &node, std::vector<Node *> others, struct fi_cq_tagged_entry *entry,
                struct fi_cq_err_entry *err = NULL, fi_addr_t *src = NULL)
{
    double deadline = now_sec() + kTimeout;
    struct fi_cq_tagged_entry scratch;
    ssize_t ret;

    while (now_sec() < deadline) {
        ret = src ? fi_cq_readfrom(node.cq, entry, 1, src) : fi_cq_read(node.cq, entry, 1);
        if (ret == 1) return 1;
        if (ret == -FI_EAVAIL) {
            struct fi_cq_err_entry local;
            if (err == NULL) err = &local;
            memset(err, 0, sizeof(*err));
            EXPECT_EQ(1, fi_cq_readerr(node.cq, err, 0));
            return -FI_EAVAIL;
        }
        EXPECT_EQ(-FI_EAGAIN, ret);
        for (Node *o : others) {
            /* progress the other worker; its entries stay queued for later reads */
            (void)fi_cq_read(o->cq, &scratch, 0);
        }
    }
    return -FI_EAGAIN;
}

class OfiProvider : public ::testing::Test {
protected:
    Watchdog watchdog{90};
};

/* A forked peer process (Xproc tests) with a pipe each way; finish() checks its exit. */
struct Child {
    pid_t pid = -1;
    int to[2] = {-1, -1}, from[2] = {-1, -1};

    template <class F> void start(F body)
    {
        ASSERT_EQ(0, pipe(to));
        ASSERT_EQ(0, pipe(from));
        pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            alarm(80);
            body(to[0], from[1]);
            _exit(0);
        }
    }

    void finish()
    {
        int status = 0;
        if (pid > 0) {
            EXPECT_EQ(pid, waitpid(pid, &status, 0));
            EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << status;
        }
        for (int fd : {to[0], to[1], from[0], from[1]}) if (fd >= 0) ::close(fd);
        pid = -1;
    }
};

/* ---------------------------------------------------------------- one process */

class OfiPair : public OfiProvider {
protected:
    Node a, b;
    fi_addr_t a_to_b = FI_ADDR_NOTAVAIL, b_to_a = FI_ADDR_NOTAVAIL;

    void SetUp() override
    {
        ASSERT_EQ(0, a.open());
        ASSERT_EQ(0, b.open());
        a_to_b = a.insert(b.name);
        b_to_a = b.insert(a.name);
        ASSERT_NE(FI_ADDR_NOTAVAIL, a_to_b);
        ASSERT_NE(FI_ADDR_NOTAVAIL, b_to_a);
    }
};

/* ---------------------------------------------------------------- untagged messages */

const uint64_t kMsgCaps = FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | FI_SOURCE | FI_MULTI_RECV;

class OfiMsgPair : public OfiProvider {
protected:
    Node a, b;
    fi_addr_t a_to_b = FI_ADDR_NOTAVAIL, b_to_a = FI_ADDR_NOTAVAIL;

    void SetUp() override
    {
        a.caps = b.caps = kMsgCaps;
        a.counters = b.counters = true;
        ASSERT_EQ(0, a.open());
        ASSERT_EQ(0, b.open());
        a_to_b = a.insert(b.name);
        b_to_a = b.insert(a.name);
    }
};

}  // namespace

#endif
