/*
 * iovecs (fi_sendv, fi_trecvv, fi_*msg with iov_count > 1): one message
 * whose data is Axon's iov layout over the iovecs. The pieces are absolute
 * addresses (base NULL) and live in the op descriptor, which lives until
 * the operation completes, as Axon asks of a layout: nothing is allocated.
 * One iovec (or none) stays the contiguous path (axon_fi_op_iov).
 */
#include "axon_fi.h"

void axon_fi_op_layout(axon_fi_op_t *op, const struct iovec *iov, size_t count, size_t len)
{
    size_t i;

    op->len = len;
    for (i = 0; i < count; ++i) {
        op->pieces[i].offset = (ptrdiff_t)(uintptr_t)iov[i].iov_base;
        op->pieces[i].length = iov[i].iov_len;
    }
    op->iov_layout.kind       = AXON_LAYOUT_IOV;
    op->iov_layout.iov.pieces = op->pieces;
    op->iov_layout.iov.count  = count;
    op->layout = &op->iov_layout;
    op->buf    = iov[0].iov_base;   /* the CQ entry's buf; Axon gets base NULL */
}
