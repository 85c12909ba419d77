/*
 * -FI_ENOSYS fillers: every ops table is complete, so an unsupported call
 * fails cleanly, with a line naming it (a warning for data operations on an
 * endpoint without the capability; bind, control and ops_open, which
 * clients probe, at info level).
 */
#include "axon_fi.h"

static int axon_fi_nosys(const char *call, int warn)
{
    if (warn) {
        AXON_FI_WARN(FI_LOG_EP_DATA, "%s: not supported here (the endpoint lacks the "
                     "capability: FI_MSG, FI_RMA or FI_ATOMIC)", call);
    } else {
        AXON_FI_INFO(FI_LOG_CORE, "%s: not supported by this object", call);
    }
    return -FI_ENOSYS;
}

int axon_fi_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
    return axon_fi_nosys("fi_bind", 0);
}

int axon_fi_no_control(struct fid *fid, int command, void *arg)
{
    return axon_fi_nosys("fi_control", 0);
}

int axon_fi_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
                        void *context)
{
    return axon_fi_nosys("fi_ops_open", 0);
}

/* Untagged messages on an endpoint without FI_MSG (bit 63 is then a tag bit), and RMA. */
static ssize_t axon_fi_no_recv(struct fid_ep *ep, void *buf, size_t len, void *desc,
                               fi_addr_t src_addr, void *context)
{
    return axon_fi_nosys("fi_recv", 1);
}

static ssize_t axon_fi_no_recvv(struct fid_ep *ep, const struct iovec *iov, void **desc,
                                size_t count, fi_addr_t src_addr, void *context)
{
    return axon_fi_nosys("fi_recvv", 1);
}

static ssize_t axon_fi_no_recvmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
    return axon_fi_nosys("fi_recvmsg", 1);
}

static ssize_t axon_fi_no_send(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                               fi_addr_t dest_addr, void *context)
{
    return axon_fi_nosys("fi_send", 1);
}

static ssize_t axon_fi_no_sendv(struct fid_ep *ep, const struct iovec *iov, void **desc,
                                size_t count, fi_addr_t dest_addr, void *context)
{
    return axon_fi_nosys("fi_sendv", 1);
}

static ssize_t axon_fi_no_sendmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
    return axon_fi_nosys("fi_sendmsg", 1);
}

static ssize_t axon_fi_no_inject(struct fid_ep *ep, const void *buf, size_t len,
                                 fi_addr_t dest_addr)
{
    return axon_fi_nosys("fi_inject", 1);
}

static ssize_t axon_fi_no_senddata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                                   uint64_t data, fi_addr_t dest_addr, void *context)
{
    return axon_fi_nosys("fi_senddata", 1);
}

static ssize_t axon_fi_no_injectdata(struct fid_ep *ep, const void *buf, size_t len,
                                     uint64_t data, fi_addr_t dest_addr)
{
    return axon_fi_nosys("fi_injectdata", 1);
}

struct fi_ops_msg axon_fi_no_msg_ops = {
    .size       = sizeof(struct fi_ops_msg),
    .recv       = axon_fi_no_recv,
    .recvv      = axon_fi_no_recvv,
    .recvmsg    = axon_fi_no_recvmsg,
    .send       = axon_fi_no_send,
    .sendv      = axon_fi_no_sendv,
    .sendmsg    = axon_fi_no_sendmsg,
    .inject     = axon_fi_no_inject,
    .senddata   = axon_fi_no_senddata,
    .injectdata = axon_fi_no_injectdata,
};

static ssize_t axon_fi_no_rma(struct fid_ep *ep, void *buf, size_t len, void *desc,
                              fi_addr_t addr, uint64_t raddr, uint64_t key, void *context)
{
    return axon_fi_nosys("fi_read", 1);
}

static ssize_t axon_fi_no_rmav(struct fid_ep *ep, const struct iovec *iov, void **desc,
                               size_t count, fi_addr_t addr, uint64_t raddr, uint64_t key,
                               void *context)
{
    return axon_fi_nosys("fi_readv", 1);
}

static ssize_t axon_fi_no_rmamsg(struct fid_ep *ep, const struct fi_msg_rma *msg,
                                 uint64_t flags)
{
    return axon_fi_nosys("fi_readmsg/fi_writemsg", 1);
}

static ssize_t axon_fi_no_rma_write(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                                    fi_addr_t addr, uint64_t raddr, uint64_t key, void *context)
{
    return axon_fi_nosys("fi_write", 1);
}

static ssize_t axon_fi_no_rma_writev(struct fid_ep *ep, const struct iovec *iov, void **desc,
                                     size_t count, fi_addr_t addr, uint64_t raddr, uint64_t key,
                                     void *context)
{
    return axon_fi_nosys("fi_writev", 1);
}

static ssize_t axon_fi_no_rma_inject(struct fid_ep *ep, const void *buf, size_t len,
                                     fi_addr_t addr, uint64_t raddr, uint64_t key)
{
    return axon_fi_nosys("fi_inject_write", 1);
}

static ssize_t axon_fi_no_rma_writedata(struct fid_ep *ep, const void *buf, size_t len,
                                        void *desc, uint64_t data, fi_addr_t addr,
                                        uint64_t raddr, uint64_t key, void *context)
{
    return axon_fi_nosys("fi_writedata", 1);
}

static ssize_t axon_fi_no_rma_injectdata(struct fid_ep *ep, const void *buf, size_t len,
                                         uint64_t data, fi_addr_t addr, uint64_t raddr,
                                         uint64_t key)
{
    return axon_fi_nosys("fi_inject_writedata", 1);
}

struct fi_ops_rma axon_fi_no_rma_ops = {
    .size        = sizeof(struct fi_ops_rma),
    .read        = axon_fi_no_rma,
    .readv       = axon_fi_no_rmav,
    .readmsg     = axon_fi_no_rmamsg,
    .write       = axon_fi_no_rma_write,
    .writev      = axon_fi_no_rma_writev,
    .writemsg    = axon_fi_no_rmamsg,
    .inject      = axon_fi_no_rma_inject,
    .writedata   = axon_fi_no_rma_writedata,
    .injectdata  = axon_fi_no_rma_injectdata,
};

/* Atomics on an endpoint without FI_ATOMIC: every call and every valid call -FI_ENOSYS. */
static ssize_t axon_fi_no_amo(struct fid_ep *ep, const void *buf, size_t count, void *desc,
                              fi_addr_t dest, uint64_t addr, uint64_t key,
                              enum fi_datatype datatype, enum fi_op op, void *context)
{
    return axon_fi_nosys("fi_atomic", 1);
}

static ssize_t axon_fi_no_amov(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
                               size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
                               enum fi_datatype datatype, enum fi_op op, void *context)
{
    return axon_fi_nosys("fi_atomicv", 1);
}

static ssize_t axon_fi_no_amomsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
                                 uint64_t flags)
{
    return axon_fi_nosys("fi_atomicmsg", 1);
}

static ssize_t axon_fi_no_amo_inject(struct fid_ep *ep, const void *buf, size_t count,
                                     fi_addr_t dest, uint64_t addr, uint64_t key,
                                     enum fi_datatype datatype, enum fi_op op)
{
    return axon_fi_nosys("fi_inject_atomic", 1);
}

static ssize_t axon_fi_no_amo_fetch(struct fid_ep *ep, const void *buf, size_t count,
                                    void *desc, void *result, void *result_desc,
                                    fi_addr_t dest, uint64_t addr, uint64_t key,
                                    enum fi_datatype datatype, enum fi_op op, void *context)
{
    return axon_fi_nosys("fi_fetch_atomic", 1);
}

static ssize_t axon_fi_no_amo_fetchv(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
                                     size_t count, struct fi_ioc *resultv, void **result_desc,
                                     size_t result_count, fi_addr_t dest, uint64_t addr,
                                     uint64_t key, enum fi_datatype datatype, enum fi_op op,
                                     void *context)
{
    return axon_fi_nosys("fi_fetch_atomicv", 1);
}

static ssize_t axon_fi_no_amo_fetchmsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
                                       struct fi_ioc *resultv, void **result_desc,
                                       size_t result_count, uint64_t flags)
{
    return axon_fi_nosys("fi_fetch_atomicmsg", 1);
}

static ssize_t axon_fi_no_amo_cmp(struct fid_ep *ep, const void *buf, size_t count, void *desc,
                                  const void *compare, void *compare_desc, void *result,
                                  void *result_desc, fi_addr_t dest, uint64_t addr,
                                  uint64_t key, enum fi_datatype datatype, enum fi_op op,
                                  void *context)
{
    return axon_fi_nosys("fi_compare_atomic", 1);
}

static ssize_t axon_fi_no_amo_cmpv(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
                                   size_t count, const struct fi_ioc *comparev,
                                   void **compare_desc, size_t compare_count,
                                   struct fi_ioc *resultv, void **result_desc,
                                   size_t result_count, fi_addr_t dest, uint64_t addr,
                                   uint64_t key, enum fi_datatype datatype, enum fi_op op,
                                   void *context)
{
    return axon_fi_nosys("fi_compare_atomicv", 1);
}

static ssize_t axon_fi_no_amo_cmpmsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
                                     const struct fi_ioc *comparev, void **compare_desc,
                                     size_t compare_count, struct fi_ioc *resultv,
                                     void **result_desc, size_t result_count, uint64_t flags)
{
    return axon_fi_nosys("fi_compare_atomicmsg", 1);
}

static int axon_fi_no_amo_valid(struct fid_ep *ep, enum fi_datatype datatype, enum fi_op op,
                                size_t *count)
{
    return axon_fi_nosys("fi_atomicvalid", 0);
}

struct fi_ops_atomic axon_fi_no_atomic_ops = {
    .size           = sizeof(struct fi_ops_atomic),
    .write          = axon_fi_no_amo,
    .writev         = axon_fi_no_amov,
    .writemsg       = axon_fi_no_amomsg,
    .inject         = axon_fi_no_amo_inject,
    .readwrite      = axon_fi_no_amo_fetch,
    .readwritev     = axon_fi_no_amo_fetchv,
    .readwritemsg   = axon_fi_no_amo_fetchmsg,
    .compwrite      = axon_fi_no_amo_cmp,
    .compwritev     = axon_fi_no_amo_cmpv,
    .compwritemsg   = axon_fi_no_amo_cmpmsg,
    .writevalid     = axon_fi_no_amo_valid,
    .readwritevalid = axon_fi_no_amo_valid,
    .compwritevalid = axon_fi_no_amo_valid,
};
