/* -FI_ENOSYS fillers: every ops table is complete, so an unsupported call fails cleanly. */
#include "axon_fi.h"

int axon_fi_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
    return -FI_ENOSYS;
}

int axon_fi_no_control(struct fid *fid, int command, void *arg)
{
    return -FI_ENOSYS;
}

int axon_fi_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
                        void *context)
{
    return -FI_ENOSYS;
}

/* Untagged messages on an endpoint without FI_MSG (bit 63 is then a tag bit), and RMA. */
static ssize_t axon_fi_no_recv(struct fid_ep *ep, void *buf, size_t len, void *desc,
                               fi_addr_t src_addr, void *context)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_recvv(struct fid_ep *ep, const struct iovec *iov, void **desc,
                                size_t count, fi_addr_t src_addr, void *context)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_recvmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_send(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                               fi_addr_t dest_addr, void *context)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_sendv(struct fid_ep *ep, const struct iovec *iov, void **desc,
                                size_t count, fi_addr_t dest_addr, void *context)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_sendmsg(struct fid_ep *ep, const struct fi_msg *msg, uint64_t flags)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_inject(struct fid_ep *ep, const void *buf, size_t len,
                                 fi_addr_t dest_addr)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_senddata(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                                   uint64_t data, fi_addr_t dest_addr, void *context)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_injectdata(struct fid_ep *ep, const void *buf, size_t len,
                                     uint64_t data, fi_addr_t dest_addr)
{
    return -FI_ENOSYS;
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
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_rmav(struct fid_ep *ep, const struct iovec *iov, void **desc,
                               size_t count, fi_addr_t addr, uint64_t raddr, uint64_t key,
                               void *context)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_rmamsg(struct fid_ep *ep, const struct fi_msg_rma *msg,
                                 uint64_t flags)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_rma_write(struct fid_ep *ep, const void *buf, size_t len, void *desc,
                                    fi_addr_t addr, uint64_t raddr, uint64_t key, void *context)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_rma_writev(struct fid_ep *ep, const struct iovec *iov, void **desc,
                                     size_t count, fi_addr_t addr, uint64_t raddr, uint64_t key,
                                     void *context)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_rma_inject(struct fid_ep *ep, const void *buf, size_t len,
                                     fi_addr_t addr, uint64_t raddr, uint64_t key)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_rma_writedata(struct fid_ep *ep, const void *buf, size_t len,
                                        void *desc, uint64_t data, fi_addr_t addr,
                                        uint64_t raddr, uint64_t key, void *context)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_rma_injectdata(struct fid_ep *ep, const void *buf, size_t len,
                                         uint64_t data, fi_addr_t addr, uint64_t raddr,
                                         uint64_t key)
{
    return -FI_ENOSYS;
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
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_amov(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
                               size_t count, fi_addr_t dest, uint64_t addr, uint64_t key,
                               enum fi_datatype datatype, enum fi_op op, void *context)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_amomsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
                                 uint64_t flags)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_amo_inject(struct fid_ep *ep, const void *buf, size_t count,
                                     fi_addr_t dest, uint64_t addr, uint64_t key,
                                     enum fi_datatype datatype, enum fi_op op)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_amo_fetch(struct fid_ep *ep, const void *buf, size_t count,
                                    void *desc, void *result, void *result_desc,
                                    fi_addr_t dest, uint64_t addr, uint64_t key,
                                    enum fi_datatype datatype, enum fi_op op, void *context)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_amo_fetchv(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
                                     size_t count, struct fi_ioc *resultv, void **result_desc,
                                     size_t result_count, fi_addr_t dest, uint64_t addr,
                                     uint64_t key, enum fi_datatype datatype, enum fi_op op,
                                     void *context)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_amo_fetchmsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
                                       struct fi_ioc *resultv, void **result_desc,
                                       size_t result_count, uint64_t flags)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_amo_cmp(struct fid_ep *ep, const void *buf, size_t count, void *desc,
                                  const void *compare, void *compare_desc, void *result,
                                  void *result_desc, fi_addr_t dest, uint64_t addr,
                                  uint64_t key, enum fi_datatype datatype, enum fi_op op,
                                  void *context)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_amo_cmpv(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
                                   size_t count, const struct fi_ioc *comparev,
                                   void **compare_desc, size_t compare_count,
                                   struct fi_ioc *resultv, void **result_desc,
                                   size_t result_count, fi_addr_t dest, uint64_t addr,
                                   uint64_t key, enum fi_datatype datatype, enum fi_op op,
                                   void *context)
{
    return -FI_ENOSYS;
}

static ssize_t axon_fi_no_amo_cmpmsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
                                     const struct fi_ioc *comparev, void **compare_desc,
                                     size_t compare_count, struct fi_ioc *resultv,
                                     void **result_desc, size_t result_count, uint64_t flags)
{
    return -FI_ENOSYS;
}

static int axon_fi_no_amo_valid(struct fid_ep *ep, enum fi_datatype datatype, enum fi_op op,
                                size_t *count)
{
    return -FI_ENOSYS;
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
