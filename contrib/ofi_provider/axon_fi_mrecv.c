/*
 * Untagged receives and multi-receive buffers (FI_MULTI_RECV). A
 * multi-receive buffer takes message after message, each at the next free
 * byte, until less than FI_OPT_MIN_MULTI_RECV is left: then its last
 * completion carries FI_MULTI_RECV and the buffer is the user's again.
 *
 * Axon sees one receive at a time for it, covering the free space, posted
 * again after each message. A receive posted again goes to the back of
 * Axon's queue, so to keep libfabric's order (a buffer is filled before
 * any receive posted after it matches) untagged receives posted while a
 * multi-receive buffer is being filled are held here, in order, and handed
 * to Axon when it is released. Untagged receives posted before it are
 * ahead of it in Axon's queue already. A directed multi-receive buffer
 * therefore also holds back later receives for other senders.
 */
#include "axon_fi.h"

static axon_status_t axon_fi_mrecv_arm(axon_fi_ep_t *ep, axon_fi_op_t *op);

/*
 * A message (or an error) for the buffer being filled: its entry, and the
 * buffer kept (returns 1) or released with FI_MULTI_RECV (returns 0).
 */
static int axon_fi_mrecv_consume(axon_fi_ep_t *ep, axon_fi_op_t *op, axon_status_t status,
                                 const axon_tag_recv_info_t *info);

/* Make op the buffer being filled; an error it meets later is its last entry. */
static void axon_fi_mrecv_activate(axon_fi_ep_t *ep, axon_fi_op_t *op)
{
    axon_status_t status;

    ep->mrecv = op;
    status = axon_fi_mrecv_arm(ep, op);
    if (status != AXON_OK) {
        axon_fi_mrecv_consume(ep, op, status, NULL);
    }
}

/* Hand held receives to Axon in order, up to the next multi-receive buffer. */
static void axon_fi_mrecv_unhold(axon_fi_ep_t *ep)
{
    axon_fi_op_t *op, copy;

    while ((ep->mrecv == NULL) && (ep->held.next != &ep->held)) {
        op = ep->held.next;
        axon_fi_list_del(op);
        if (op->multi) {
            axon_fi_mrecv_activate(ep, op);
            continue;
        }
        copy = *op;   /* a failed start releases op */
        if (axon_fi_recv_start(ep, op, AXON_TAG_MASK_FULL) != 0) {
            /* Too late to fail the call (logged): the receive completes in error. */
            axon_fi_recv_entry(ep, &copy, AXON_ERR_IO_ERROR, NULL, 0);
        }
    }
}

static int axon_fi_mrecv_consume(axon_fi_ep_t *ep, axon_fi_op_t *op, axon_status_t status,
                                 const axon_tag_recv_info_t *info)
{
    size_t avail = op->len - op->used, took = avail;
    int release  = 1;

    if ((info != NULL) && ((status == AXON_OK) || (status == AXON_ERR_MSG_TRUNCATED))) {
        took    = (info->length < avail) ? info->length : avail;
        release = (avail - took < ep->min_multi_recv);
    }
    axon_fi_recv_entry(ep, op, status, info, release ? FI_MULTI_RECV : 0);
    op->used += took;
    if (!release) {
        return 1;
    }
    ep->mrecv = NULL;
    axon_fi_op_put(ep->domain, op);
    axon_fi_mrecv_unhold(ep);
    return 0;
}

static void axon_fi_mrecv_cb(axon_request_h req, axon_status_t status,
                             const axon_tag_recv_info_t *info, void *user_data)
{
    axon_fi_op_t *op = user_data;
    axon_fi_ep_t *ep = op->ep;

    axon_fi_inflight_del(op);
    op->req = NULL;
    axon_request_free(req);
    if (ep == NULL) {
        axon_fi_op_put(op->domain, op);   /* the endpoint closed under it */
        return;
    }
    if (axon_fi_mrecv_consume(ep, op, status, info)) {
        status = axon_fi_mrecv_arm(ep, op);
        if (status != AXON_OK) {
            axon_fi_mrecv_consume(ep, op, status, NULL);
        }
    }
}

/* Post op's free space to Axon; as long as messages are waiting it completes at once. */
static axon_status_t axon_fi_mrecv_arm(axon_fi_ep_t *ep, axon_fi_op_t *op)
{
    axon_request_param_t param;
    axon_tag_recv_info_t info;
    axon_request_h req;
    axon_status_t status;

    axon_fi_recv_param(op, axon_fi_mrecv_cb, &info, &param);
    for (;;) {
        status = axon_tag_recv_nb(ep->worker, (uint8_t *)op->buf + op->used, op->len - op->used,
                                  AXON_FI_MSG_TAG, AXON_TAG_MASK_FULL, &param, &req);
        if (status == AXON_INPROGRESS) {
            op->req = req;
            axon_fi_inflight_add(ep, op);
            return AXON_OK;
        }
        if (status != AXON_OK) {
            AXON_FI_WARN(FI_LOG_EP_DATA, "multi-receive buffer: posting %zu bytes failed: %s",
                         op->len - op->used, axon_status_string(status));
            return status;
        }
        if (!axon_fi_mrecv_consume(ep, op, AXON_OK, &info)) {
            return AXON_OK;   /* filled and released */
        }
    }
}

ssize_t axon_fi_mrecv_post(axon_fi_ep_t *ep, axon_fi_op_t *op, int multi)
{
    axon_status_t status;

    op->multi = (uint8_t)multi;
    if ((ep->mrecv != NULL) || (ep->held.next != &ep->held)) {
        axon_fi_list_add_tail(&ep->held, op);
        return 0;
    }
    if (!multi) {
        return axon_fi_recv_start(ep, op, AXON_TAG_MASK_FULL);
    }
    ep->mrecv = op;
    status = axon_fi_mrecv_arm(ep, op);
    if (status == AXON_OK) {
        return 0;
    }
    if (op->used > 0) {
        axon_fi_mrecv_consume(ep, op, status, NULL);   /* it took messages: end it in error */
        return 0;
    }
    ep->mrecv = NULL;
    axon_fi_op_put(ep->domain, op);
    return -axon_fi_errno(status);
}

int axon_fi_mrecv_cancel(axon_fi_ep_t *ep, void *context)
{
    axon_fi_op_t *op;

    for (op = ep->held.next; op != &ep->held; op = op->next) {
        if (op->context == context) {
            axon_fi_list_del(op);
            axon_fi_recv_entry(ep, op, AXON_ERR_CANCELED, NULL, op->multi ? FI_MULTI_RECV : 0);
            axon_fi_op_put(ep->domain, op);
            return 1;
        }
    }
    return 0;
}

void axon_fi_mrecv_close(axon_fi_ep_t *ep)
{
    axon_fi_op_t *op;

    while (ep->held.next != &ep->held) {
        op = ep->held.next;
        axon_fi_list_del(op);
        axon_fi_op_put(ep->domain, op);
    }
}
