/*
 * Completion channels, completion queues, their events and polling.
 */
#include <stdlib.h>
#include <string.h>
#include "log.h"
#include "vabi.h"

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
    vabi_channel_t *ch = calloc(1, sizeof(*ch));
    int ret;

    if (ch == NULL) {
        return vabi_fail_null(ENOMEM);
    }
    if ((ret = axon_dev_create_comp_channel(vabi_dev(context), &ch->dev)) != 0) {
        free(ch);
        return vabi_fail_null(ret);
    }
    ch->ibv.context = context;
    ch->ibv.fd      = ch->dev->fd;
    return &ch->ibv;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
    int ret = axon_dev_destroy_comp_channel(VABI(channel, channel)->dev);

    if (ret) {
        return ret;   /* EBUSY while CQs use it */
    }
    free(channel);
    return 0;
}

/* A CQ of the device behind its wrapper, whose user context is the wrapper. */
static vabi_cq_t *vabi_cq_create(struct ibv_context *context, int cqe, void *cq_context,
                                 struct ibv_comp_channel *channel, int comp_vector,
                                 uint32_t flags)
{
    vabi_cq_t *cq;
    int ret;

    if ((comp_vector < 0) || (comp_vector >= context->num_comp_vectors)) {
        axon_error("libibverbs on softib: create_cq: comp_vector %d (the device has %d)",
                   comp_vector, context->num_comp_vectors);
        return vabi_fail_null(EINVAL);
    }
    cq = calloc(1, sizeof(*cq));
    if (cq == NULL) {
        return vabi_fail_null(ENOMEM);
    }
    ret = axon_dev_create_cq_ex(vabi_dev(context), cqe, cq,
                                (channel != NULL) ? VABI(channel, channel)->dev : NULL,
                                comp_vector, flags, &cq->dev);
    if (ret) {
        free(cq);
        return vabi_fail_null(ret);
    }
    cq->ex.context    = context;
    cq->ex.channel    = channel;
    cq->ex.cq_context = cq_context;
    cq->ex.cqe        = cq->dev->cqe;
    pthread_mutex_init(&cq->ex.mutex, NULL);
    pthread_cond_init(&cq->ex.cond, NULL);
    if (channel != NULL) {
        channel->refcnt++;
    }
    return cq;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
                             struct ibv_comp_channel *channel, int comp_vector)
{
    vabi_cq_t *cq = vabi_cq_create(context, cqe, cq_context, channel, comp_vector, 0);

    return (cq != NULL) ? ibv_cq_ex_to_cq(&cq->ex) : NULL;
}

int ibv_destroy_cq(struct ibv_cq *cq)
{
    struct ibv_comp_channel *channel = cq->channel;
    int ret;

    if ((ret = axon_dev_destroy_cq(VABI(cq, cq)->dev)) != 0) {
        return ret;
    }
    if (channel != NULL) {
        channel->refcnt--;
    }
    pthread_mutex_destroy(&cq->mutex);
    pthread_cond_destroy(&cq->cond);
    free(cq);
    return 0;
}

int ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
    (void)cq;
    (void)cqe;
    return vabi_unsupported("ibv_resize_cq");
}

int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context)
{
    axon_dev_cq_t *dcq;
    void *wrapper;
    int ret;

    if ((ret = axon_dev_get_cq_event(VABI(channel, channel)->dev, &dcq, &wrapper)) != 0) {
        errno = ret;
        return -1;
    }
    *cq         = ibv_cq_ex_to_cq(&((vabi_cq_t*)wrapper)->ex);
    *cq_context = (*cq)->cq_context;
    return 0;
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
    axon_dev_ack_cq_events(VABI(cq, cq)->dev, nevents);
    pthread_mutex_lock(&cq->mutex);
    cq->comp_events_completed += nevents;
    pthread_cond_broadcast(&cq->cond);
    pthread_mutex_unlock(&cq->mutex);
}

/*
 * Work completions pass through: the layouts are asserted equal
 * (dev_ibv_map.h). An extended CQ's batch may hold some already: they come
 * first.
 */
int vabi_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc)
{
    vabi_cq_t *vcq = VABI(cq, cq);
    int n = 0, ret;

    if (vcq->count > 0) {
        for (; (n < num_entries) && (vcq->count > 0); n++, vcq->head++, vcq->count--) {
            memcpy(&wc[n], &vcq->batch[vcq->head], sizeof(wc[n]));
        }
        vcq->current = 0;
    }
    ret = axon_dev_poll_cq(vcq->dev, num_entries - n, (axon_dev_wc_t*)(void*)&wc[n]);
    return (ret < 0) ? ((n > 0) ? n : ret) : (n + ret);
}

/* ------------------------------------------------------------ extended CQs */

/* The entry being read. */
static const axon_dev_wc_t *vabi_cq_cur(struct ibv_cq_ex *ex)
{
    const vabi_cq_t *cq = (const vabi_cq_t*)(const void*)ex;

    return &cq->batch[cq->head];
}

/* Make batch[head] current, reading a batch from the device when empty; ENOENT when none. */
static int vabi_cq_next_entry(vabi_cq_t *cq)
{
    int n;

    if (cq->count == 0) {
        n = axon_dev_poll_cq(cq->dev, VABI_CQ_BATCH, cq->batch);
        if (n <= 0) {
            return (n < 0) ? -n : ENOENT;
        }
        cq->head  = 0;
        cq->count = (unsigned)n;
    }
    cq->current   = 1;
    cq->ex.status = (enum ibv_wc_status)cq->batch[cq->head].status;
    cq->ex.wr_id  = cq->batch[cq->head].wr_id;
    return 0;
}

static void vabi_cq_consume(vabi_cq_t *cq)
{
    if (cq->current) {
        cq->current = 0;
        cq->head++;
        cq->count--;
    }
}

static int vabi_cq_start_poll(struct ibv_cq_ex *ex, struct ibv_poll_cq_attr *attr)
{
    if (attr->comp_mask) {
        axon_error("libibverbs on softib: start_poll: comp_mask 0x%x", attr->comp_mask);
        return EINVAL;
    }
    return vabi_cq_next_entry((vabi_cq_t*)(void*)ex);
}

static int vabi_cq_next_poll(struct ibv_cq_ex *ex)
{
    vabi_cq_consume((vabi_cq_t*)(void*)ex);
    return vabi_cq_next_entry((vabi_cq_t*)(void*)ex);
}

static void vabi_cq_end_poll(struct ibv_cq_ex *ex)
{
    vabi_cq_consume((vabi_cq_t*)(void*)ex);
}

static enum ibv_wc_opcode vabi_cq_read_opcode(struct ibv_cq_ex *ex)
{
    return (enum ibv_wc_opcode)vabi_cq_cur(ex)->opcode;
}

static uint32_t vabi_cq_read_vendor_err(struct ibv_cq_ex *ex)
{
    return vabi_cq_cur(ex)->vendor_err;
}

static uint32_t vabi_cq_read_byte_len(struct ibv_cq_ex *ex)
{
    return vabi_cq_cur(ex)->byte_len;
}

static __be32 vabi_cq_read_imm_data(struct ibv_cq_ex *ex)
{
    return vabi_cq_cur(ex)->imm_data;
}

static uint32_t vabi_cq_read_qp_num(struct ibv_cq_ex *ex)
{
    return vabi_cq_cur(ex)->qp_num;
}

static uint32_t vabi_cq_read_src_qp(struct ibv_cq_ex *ex)
{
    return vabi_cq_cur(ex)->src_qp;
}

static unsigned int vabi_cq_read_wc_flags(struct ibv_cq_ex *ex)
{
    return vabi_cq_cur(ex)->wc_flags;
}

static uint32_t vabi_cq_read_slid(struct ibv_cq_ex *ex)
{
    return vabi_cq_cur(ex)->slid;
}

static uint8_t vabi_cq_read_sl(struct ibv_cq_ex *ex)
{
    return vabi_cq_cur(ex)->sl;
}

static uint8_t vabi_cq_read_dlid_path_bits(struct ibv_cq_ex *ex)
{
    return vabi_cq_cur(ex)->dlid_path_bits;
}

/*
 * ibv_create_cq_ex: the standard completion fields, and the flags softib
 * has (ignore overrun; single-threaded, a hint). Timestamps, CVLAN, flow
 * tags, tag matching and parent domains it has not.
 */
struct ibv_cq_ex *vabi_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr)
{
    const uint32_t known_flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED |
                                 IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
    uint32_t flags = (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) ? attr->flags : 0;
    vabi_cq_t *cq;

    if ((attr->comp_mask & ~(uint32_t)IBV_CQ_INIT_ATTR_MASK_FLAGS) ||
        (attr->wc_flags & ~(uint64_t)IBV_WC_STANDARD_FLAGS) || (flags & ~known_flags)) {
        axon_error("libibverbs on softib: create_cq_ex: comp_mask 0x%x, wc_flags 0x%llx, flags "
                   "0x%x not supported (the standard fields, ignore overrun)", attr->comp_mask,
                   (unsigned long long)attr->wc_flags, flags);
        return vabi_fail_null(EOPNOTSUPP);
    }
    if (attr->cqe > INT32_MAX) {
        axon_error("libibverbs on softib: create_cq_ex: cqe %u", attr->cqe);
        return vabi_fail_null(EINVAL);
    }
    cq = vabi_cq_create(context, (int)attr->cqe, attr->cq_context, attr->channel,
                        (int)attr->comp_vector,
                        (flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN) ?
                        AXON_DEV_CQ_IGNORE_OVERRUN : 0);
    if (cq == NULL) {
        return NULL;
    }
    cq->ex.start_poll          = vabi_cq_start_poll;
    cq->ex.next_poll           = vabi_cq_next_poll;
    cq->ex.end_poll            = vabi_cq_end_poll;
    cq->ex.read_opcode         = vabi_cq_read_opcode;
    cq->ex.read_vendor_err     = vabi_cq_read_vendor_err;
    cq->ex.read_byte_len       = vabi_cq_read_byte_len;
    cq->ex.read_imm_data       = vabi_cq_read_imm_data;
    cq->ex.read_qp_num         = vabi_cq_read_qp_num;
    cq->ex.read_src_qp         = vabi_cq_read_src_qp;
    cq->ex.read_wc_flags       = vabi_cq_read_wc_flags;
    cq->ex.read_slid           = vabi_cq_read_slid;
    cq->ex.read_sl             = vabi_cq_read_sl;
    cq->ex.read_dlid_path_bits = vabi_cq_read_dlid_path_bits;
    return &cq->ex;
}

/* ------------------------------------------------------------ notification */

int vabi_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
    return axon_dev_req_notify_cq(VABI(cq, cq)->dev, solicited_only);
}
