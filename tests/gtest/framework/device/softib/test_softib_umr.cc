/*
 * softib's user-mode memory registration (seed §8.8) at the device layer,
 * one test per rule the manual states or Axon adds:
 *   - §8.8.1.1 UMR in the device attributes (CAP_MASK takes it away);
 *   - §8.8.1.2 only a QP created with CREATE_UMR posts UMRs, with at most
 *     max_inl_send_klms entries inline;
 *   - §8.8.1.3 indirect keys created empty, queried, released;
 *   - §8.8.1.4 entries from a registered list when not inline;
 *   - §8.8.1.5 list and repeat (interleaved) fills; RDMA write, read, send,
 *     receive and atomics through the key, byte-exact against a model of
 *     the layout, with pieces crossing page boundaries and zero-length
 *     pieces; later WRs of the QP use the key without waiting for the fill;
 *     invalidation, after which the key gives a remote access error;
 *     nesting up to max_umr_recursion_depth and one beyond it;
 * plus every entry's rights and bounds checked when accessed, bad fills
 * refused at post time (EINVAL and a line naming the value), fills between
 * retransmitted WRs on a lossy wire, and a key of another process (shm and
 * UDP wires) written and read while that process sleeps.
 */
#include "log_capture.h"
#include "softib_env.h"

#include <algorithm>
#include <random>

#include <sys/mman.h>

namespace {

const int      kLocalWrite = AXON_DEV_ACCESS_LOCAL_WRITE;
const int      kRemoteAll  = AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_WRITE |
                             AXON_DEV_ACCESS_REMOTE_READ | AXON_DEV_ACCESS_REMOTE_ATOMIC;
const uint64_t kBase       = 0x7a0000000000ull;   /* the layouts' own address space */
const uint32_t kInline     = 16;                  /* the device's max_send_wqe_inline_klms */

/* A piece of a layout: where its bytes are (what the model of the layout is) */
struct Piece {
    uint8_t *ptr;
    size_t   len;
};

/* ---------------------------------------------------------------- the WRs */

/* A list fill of k: inline unless through is given */
void list_wr(axon_dev_send_wr_t *wr, axon_dev_mr_t *k, axon_dev_mem_region_t *regs, uint32_t n,
             axon_dev_mkey_list_t *through = nullptr, uint64_t access = kRemoteAll,
             uint64_t base = kBase)
{
    memset(wr, 0, sizeof(*wr));
    wr->wr_id                        = 0xf111;
    wr->opcode                       = AXON_DEV_WR_UMR_FILL;
    wr->send_flags                   = AXON_DEV_SEND_SIGNALED |
                                       (through ? 0 : AXON_DEV_SEND_INLINE);
    wr->wr.umr.umr_type              = AXON_DEV_UMR_MR_LIST;
    wr->wr.umr.memory_objects        = through;
    wr->wr.umr.exp_access            = access;
    wr->wr.umr.modified_mr           = k;
    wr->wr.umr.base_addr             = base;
    wr->wr.umr.num_mrs               = n;
    wr->wr.umr.mem_list.mem_reg_list = regs;
}

/* A repeat fill of k, inline: n entries of one stride dimension, *repeat repetitions */
void repeat_wr(axon_dev_send_wr_t *wr, axon_dev_mr_t *k, axon_dev_mem_repeat_block_t *blocks,
               uint32_t n, size_t *repeat)
{
    memset(wr, 0, sizeof(*wr));
    wr->wr_id                                    = 0xf222;
    wr->opcode                                   = AXON_DEV_WR_UMR_FILL;
    wr->send_flags                               = AXON_DEV_SEND_SIGNALED | AXON_DEV_SEND_INLINE;
    wr->wr.umr.umr_type                          = AXON_DEV_UMR_REPEAT;
    wr->wr.umr.exp_access                        = kRemoteAll;
    wr->wr.umr.modified_mr                       = k;
    wr->wr.umr.base_addr                         = kBase;
    wr->wr.umr.num_mrs                           = n;
    wr->wr.umr.mem_list.rb.mem_repeat_block_list = blocks;
    wr->wr.umr.mem_list.rb.repeat_count          = repeat;
    wr->wr.umr.mem_list.rb.stride_dim            = 1;
}

void invalidate_wr(axon_dev_send_wr_t *wr, axon_dev_mr_t *k)
{
    memset(wr, 0, sizeof(*wr));
    wr->wr_id              = 0xdead;
    wr->opcode             = AXON_DEV_WR_UMR_INVALIDATE;
    wr->send_flags         = AXON_DEV_SEND_SIGNALED;
    wr->wr.umr.modified_mr = k;
}

class SoftibUmr : public SoftibTest {
protected:
    Qp                                  a_, b_;   /* a_ may post UMRs; b_ is its peer */
    std::vector<axon_dev_mr_t *>        keys_;
    std::vector<axon_dev_mkey_list_t *> lists_;

    void TearDown() override
    {
        for (auto it = keys_.rbegin(); it != keys_.rend(); ++it) {
            EXPECT_EQ(0, axon_dev_dereg_mr(*it));
        }
        keys_.clear();
        for (auto *l : lists_) {
            EXPECT_EQ(0, axon_dev_dealloc_mkey_list(l));
        }
        lists_.clear();
        SoftibTest::TearDown();
    }

    /* softib0 with a_ (CREATE_UMR) connected to b_ (loopback, 1 KiB MTU: multi-packet) */
    void open_pair(uint32_t inl = kInline)
    {
        open_dev();
        ASSERT_NE(0u, dev_.attr.cap_flags & AXON_DEV_CAP_UMR);
        ASSERT_EQ(0, dev_.qp(&a_, AXON_DEV_QPT_RC, 1, nullptr, 0, 64, nullptr, nullptr,
                             AXON_DEV_QP_CREATE_UMR, inl));
        ASSERT_EQ(0, dev_.qp(&b_, AXON_DEV_QPT_RC, 1, nullptr, 0, 64, nullptr, nullptr,
                             AXON_DEV_QP_CREATE_UMR, inl));
        ASSERT_EQ(0, dev_.connect(a_, b_));
    }

    axon_dev_mr_t *key(uint64_t entries = 64, uint64_t access = kRemoteAll,
                       axon_dev_pd_t *pd = nullptr)
    {
        axon_dev_mr_init_attr_t attr;
        axon_dev_mr_t          *mr = nullptr;

        memset(&attr, 0, sizeof(attr));
        attr.max_reg_descriptors = entries;
        attr.create_flags        = AXON_DEV_MR_INDIRECT_KLMS;
        attr.access_flags        = access;
        int ret = axon_dev_create_mr(pd ? pd : dev_.pd, &attr, &mr);
        EXPECT_EQ(0, ret) << "create_mr " << entries;
        if (ret == 0) {
            keys_.push_back(mr);
        }
        return mr;
    }

    void dereg_key(axon_dev_mr_t *mr)
    {
        keys_.erase(std::find(keys_.begin(), keys_.end(), mr));
        EXPECT_EQ(0, axon_dev_dereg_mr(mr));
    }

    axon_dev_mkey_list_t *list(uint32_t size)
    {
        axon_dev_mkey_list_t *l = nullptr;
        int ret = axon_dev_alloc_mkey_list(dev_.pd, size, &l);
        EXPECT_EQ(0, ret) << "alloc_mkey_list " << size;
        if (ret == 0) {
            lists_.push_back(l);
        }
        return l;
    }

    /* Post wr on a_ and expect its one completion with status */
    void post_expect(axon_dev_send_wr_t *wr, int status = AXON_DEV_WC_SUCCESS)
    {
        axon_dev_wc_t wc;
        ASSERT_EQ(0, post_one(a_.qp, wr));
        ASSERT_TRUE(poll_one(a_.scq, &wc)) << "no completion of opcode " << wr->opcode;
        EXPECT_EQ(status, (int)wc.status) << wc_status_name(wc.status);
        EXPECT_EQ(wr->wr_id, wc.wr_id);
    }

    /* One RDMA op of a_ towards the key raddr/rkey, local len bytes at lbuf; its status */
    int rdma(axon_dev_wr_opcode_t op, const Buf &lbuf, size_t loff, uint32_t len, uint64_t raddr,
             uint32_t rkey)
    {
        axon_dev_wc_t wc;
        EXPECT_EQ(0, post_rdma(a_.qp, 7, op, lbuf.ptr + loff, len, lbuf.lkey(), raddr, rkey));
        if (!poll_one(a_.scq, &wc)) {
            ADD_FAILURE() << "no completion";
            return -1;
        }
        return (int)wc.status;
    }
};

/* The model: the layout's bytes in order */
std::vector<uint8_t> gather(const std::vector<Piece> &pieces)
{
    std::vector<uint8_t> out;
    for (const Piece &p : pieces) {
        out.insert(out.end(), p.ptr, p.ptr + p.len);
    }
    return out;
}

void scatter(const std::vector<Piece> &pieces, const uint8_t *src)
{
    for (const Piece &p : pieces) {
        memcpy(p.ptr, src, p.len);
        src += p.len;
    }
}

/* The repeat layout's pieces: entry i's bytes of repetition r at base_i + r * stride_i */
std::vector<Piece> repeat_pieces(const std::vector<Piece> &entries,
                                 const std::vector<size_t> &strides, size_t repeat)
{
    std::vector<Piece> out;
    for (size_t r = 0; r < repeat; ++r) {
        for (size_t i = 0; i < entries.size(); ++i) {
            out.push_back({entries[i].ptr + r * strides[i], entries[i].len});
        }
    }
    return out;
}

/* Every byte of b outside the pieces is still 0 */
bool untouched_outside(const Buf &b, const std::vector<Piece> &pieces)
{
    std::vector<bool> covered(b.len);
    for (const Piece &p : pieces) {
        if ((p.ptr >= b.ptr) && (p.ptr < b.ptr + b.len)) {
            std::fill(covered.begin() + (p.ptr - b.ptr), covered.begin() + (p.ptr - b.ptr) + p.len,
                      true);
        }
    }
    for (size_t i = 0; i < b.len; ++i) {
        if (!covered[i] && (b.ptr[i] != 0)) {
            ADD_FAILURE() << "byte " << i << " outside the layout changed";
            return false;
        }
    }
    return true;
}

void fill_random(uint8_t *p, size_t len, unsigned seed)
{
    std::mt19937 rng(seed);
    for (size_t i = 0; i < len; ++i) {
        p[i] = (uint8_t)rng();
    }
}

/* ---------------------------------------------------------------- capabilities */

TEST_F(SoftibUmr, LimitsInDeviceAttributes)
{
    axon_dev_mkey_attr_t ma;

    open_dev();
    EXPECT_NE(0u, dev_.attr.cap_flags & AXON_DEV_CAP_UMR);
    EXPECT_EQ(4096u, dev_.attr.umr.max_klm_list_size);
    EXPECT_EQ(kInline, dev_.attr.umr.max_send_wqe_inline_klms);
    EXPECT_EQ(4u, dev_.attr.umr.max_umr_recursion_depth);
    EXPECT_EQ(1u, dev_.attr.umr.max_umr_stride_dimension);
    axon_dev_mr_t *k = key(dev_.attr.umr.max_klm_list_size);
    ASSERT_NE(nullptr, k);
    ASSERT_EQ(0, axon_dev_query_mkey(k, &ma));
    EXPECT_EQ((int)dev_.attr.umr.max_klm_list_size, ma.n_mkey_entries);
    EXPECT_EQ(nullptr, k->addr);
    EXPECT_EQ(0u, k->length);
    EXPECT_EQ(k->lkey, k->rkey);
}

TEST_F(SoftibUmr, CapMaskRemovesUmr)
{
    axon_dev_mr_init_attr_t attr;
    axon_dev_mr_t          *mr = nullptr;
    axon_dev_mkey_list_t   *l  = nullptr;
    Qp                      q;

    env_.set("AXON_SOFTIB_CAP_MASK", "umr");
    open_dev();
    EXPECT_EQ(0u, dev_.attr.cap_flags & AXON_DEV_CAP_UMR);
    EXPECT_EQ(0u, dev_.attr.umr.max_klm_list_size);
    EXPECT_EQ(0u, dev_.attr.umr.max_umr_recursion_depth);
    memset(&attr, 0, sizeof(attr));
    attr.max_reg_descriptors = 4;
    attr.create_flags        = AXON_DEV_MR_INDIRECT_KLMS;
    LogCapture logs;
    EXPECT_EQ(EOPNOTSUPP, axon_dev_create_mr(dev_.pd, &attr, &mr));
    EXPECT_EQ(EOPNOTSUPP, axon_dev_alloc_mkey_list(dev_.pd, 4, &l));
    EXPECT_EQ(EOPNOTSUPP, dev_.qp(&q, AXON_DEV_QPT_RC, 1, nullptr, 0, 64, nullptr, nullptr,
                                  AXON_DEV_QP_CREATE_UMR));
    EXPECT_TRUE(logs.any_contains("UMR is masked off"));
}

TEST_F(SoftibUmr, CreateChecksItsArguments)
{
    axon_dev_mr_init_attr_t attr;
    axon_dev_mkey_attr_t    ma;
    axon_dev_mr_t          *mr = nullptr;
    axon_dev_mkey_list_t   *l  = nullptr;
    Qp                      q;

    open_dev();
    memset(&attr, 0, sizeof(attr));
    attr.create_flags = AXON_DEV_MR_INDIRECT_KLMS;
    EXPECT_EINVAL_LOGS(axon_dev_create_mr(dev_.pd, &attr, &mr), "max_reg_descriptors 0");
    attr.max_reg_descriptors = dev_.attr.umr.max_klm_list_size + 1;
    EXPECT_EINVAL_LOGS(axon_dev_create_mr(dev_.pd, &attr, &mr), "max_reg_descriptors 4097");
    attr.max_reg_descriptors = 4;
    attr.create_flags        = 0;
    EXPECT_EINVAL_LOGS(axon_dev_create_mr(dev_.pd, &attr, &mr), "create_flags 0x0");
    attr.create_flags = AXON_DEV_MR_INDIRECT_KLMS;
    attr.access_flags = AXON_DEV_ACCESS_REMOTE_WRITE;
    EXPECT_EINVAL_LOGS(axon_dev_create_mr(dev_.pd, &attr, &mr), "without local write");
    EXPECT_EINVAL_LOGS(axon_dev_alloc_mkey_list(dev_.pd, 0, &l), "max_klm_list_size 0");
    EXPECT_EINVAL_LOGS(dev_.qp(&q, AXON_DEV_QPT_RC, 1, nullptr, 0, 64, nullptr, nullptr,
                               AXON_DEV_QP_CREATE_UMR, kInline + 1),
                       "max_inl_send_klms 17");
    /* query_mkey is for indirect keys */
    Buf plain = dev_.reg(64, kLocalWrite);
    EXPECT_EINVAL_LOGS(axon_dev_query_mkey(plain.mr, &ma), "not an indirect key");
    /* a QP reports the inline entries it takes */
    ASSERT_EQ(0, dev_.qp(&q, AXON_DEV_QPT_RC, 1, nullptr, 0, 64, nullptr, nullptr,
                         AXON_DEV_QP_CREATE_UMR, 5));
    axon_dev_qp_attr_t      qa;
    axon_dev_qp_init_attr_t init;
    ASSERT_EQ(0, axon_dev_query_qp(q.qp, &qa, AXON_DEV_QP_STATE, &init));
    EXPECT_EQ(5u, init.max_inl_send_klms);
    EXPECT_NE(0u, init.create_flags & AXON_DEV_QP_CREATE_UMR);
}

/* ---------------------------------------------------------------- list fills */

/*
 * A list layout over two regions: pieces crossing page boundaries, a
 * zero-length piece, one of three bytes, pieces out of address order (and
 * none overlapping: the model is the pieces' bytes in order).
 */
struct ListLayout {
    Buf                                mem, mem2;
    std::vector<axon_dev_mem_region_t> regs;
    std::vector<Piece>                 pieces;
    size_t                             total = 0;

    void add(const Buf &b, size_t off, size_t len)
    {
        regs.push_back({b.addr(off), b.mr, len});
        pieces.push_back({b.ptr + off, len});
        total += len;
    }
};

void make_list(SoftibDev &dev, ListLayout *l, int access = kRemoteAll)
{
    l->mem  = dev.reg(4 * 4096, access);
    l->mem2 = dev.reg(3 * 4096, access);
    l->add(l->mem, 100, 4000);          /* crosses a page boundary */
    l->add(l->mem, 8192 - 10, 0);       /* zero-length */
    l->add(l->mem2, 7, 5000);           /* crosses one, in another region */
    l->add(l->mem, 30, 20);             /* before the first piece in memory */
    l->add(l->mem, 13000, 3);
    l->add(l->mem2, 3 * 4096 - 1, 1);   /* the region's last byte */
    l->add(l->mem, 8192 - 2, 4096 + 4); /* crosses two */
}

TEST_F(SoftibUmr, ListFillWriteReadByteExact)
{
    ListLayout l;
    axon_dev_send_wr_t wr;

    open_pair();
    make_list(dev_, &l);
    axon_dev_mr_t *k = key();
    list_wr(&wr, k, l.regs.data(), (uint32_t)l.regs.size());
    post_expect(&wr);

    Buf src = dev_.reg(l.total, kLocalWrite), dst = dev_.reg(l.total, kLocalWrite);
    fill_random(src.ptr, l.total, 1);
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_WRITE, src, 0, (uint32_t)l.total, kBase,
                                        k->rkey));
    std::vector<uint8_t> model(src.ptr, src.ptr + l.total);
    EXPECT_TRUE(gather(l.pieces) == model);
    EXPECT_TRUE(untouched_outside(l.mem, l.pieces));
    EXPECT_TRUE(untouched_outside(l.mem2, l.pieces));

    ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_READ, dst, 0, (uint32_t)l.total, kBase,
                                        k->rkey));
    EXPECT_EQ(0, memcmp(dst.ptr, src.ptr, l.total));

    /* sub-ranges starting and ending inside pieces, across several */
    std::mt19937 rng(7);
    for (int i = 0; i < 40; ++i) {
        size_t off = rng() % l.total, len = 1 + rng() % (l.total - off);
        std::vector<uint8_t> now = gather(l.pieces);
        fill_random(src.ptr, len, 100 + i);
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_WRITE, src, 0, (uint32_t)len,
                                            kBase + off, k->rkey)) << off << "+" << len;
        memcpy(now.data() + off, src.ptr, len);
        ASSERT_TRUE(gather(l.pieces) == now) << off << "+" << len;
        memset(dst.ptr, 0, len);
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_READ, dst, 0, (uint32_t)len,
                                            kBase + off, k->rkey));
        ASSERT_EQ(0, memcmp(dst.ptr, now.data() + off, len)) << off << "+" << len;
    }
}

TEST_F(SoftibUmr, ListKeyGathersSendsAndScattersReceives)
{
    ListLayout l, r;
    axon_dev_send_wr_t wr;
    axon_dev_wc_t wc;

    open_pair();
    make_list(dev_, &l, kLocalWrite);
    make_list(dev_, &r, kLocalWrite);
    axon_dev_mr_t *lk = key(64, kLocalWrite), *rk = key(64, kLocalWrite);
    list_wr(&wr, lk, l.regs.data(), (uint32_t)l.regs.size(), nullptr, kLocalWrite);
    post_expect(&wr);
    list_wr(&wr, rk, r.regs.data(), (uint32_t)r.regs.size(), nullptr, kLocalWrite);
    post_expect(&wr);

    std::vector<uint8_t> data(l.total);
    fill_random(data.data(), data.size(), 3);
    scatter(l.pieces, data.data());
    /* b_ receives into the indirect key rk (its own QP, same PD) */
    ASSERT_EQ(0, post_recv(b_.qp, 9, (void *)(uintptr_t)kBase, (uint32_t)r.total, rk->lkey));
    ASSERT_EQ(0, post_send_op(a_.qp, 8, AXON_DEV_WR_SEND, (void *)(uintptr_t)kBase,
                              (uint32_t)l.total, lk->lkey));
    ASSERT_TRUE(poll_one(a_.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    EXPECT_EQ(l.total, wc.byte_len);
    EXPECT_TRUE(gather(r.pieces) == data);
}

TEST_F(SoftibUmr, NonInlineFillThroughAList)
{
    const uint32_t n = 1000;   /* entries: far more than inline */
    std::vector<axon_dev_mem_region_t> regs;
    std::vector<Piece> pieces;
    axon_dev_send_wr_t wr;

    open_pair();
    Buf mem = dev_.reg((size_t)n * 100, kRemoteAll);
    for (uint32_t i = 0; i < n; ++i) {   /* 64-byte blocks of a 100-byte stride, reversed */
        size_t off = (size_t)(n - 1 - i) * 100;
        regs.push_back({mem.addr(off), mem.mr, 64});
        pieces.push_back({mem.ptr + off, 64});
    }
    axon_dev_mr_t *k = key(n);
    axon_dev_mkey_list_t *objs = list(n);
    list_wr(&wr, k, regs.data(), n, objs);
    post_expect(&wr);
    /* the list is free again once the fill executed: it may go, the key stays */
    lists_.pop_back();
    EXPECT_EQ(0, axon_dev_dealloc_mkey_list(objs));

    Buf src = dev_.reg((size_t)n * 64, kLocalWrite), dst = dev_.reg((size_t)n * 64, kLocalWrite);
    fill_random(src.ptr, (size_t)n * 64, 5);
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_WRITE, src, 0, n * 64, kBase, k->rkey));
    EXPECT_TRUE(gather(pieces) == std::vector<uint8_t>(src.ptr, src.ptr + (size_t)n * 64));
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_READ, dst, 0, n * 64, kBase, k->rkey));
    EXPECT_EQ(0, memcmp(dst.ptr, src.ptr, (size_t)n * 64));
}

/* A fill's list is the device's until the fill executes: a FENCEd fill behind an RNR-held send */
TEST_F(SoftibUmr, ListStaysBusyUntilItsFillExecutes)
{
    axon_dev_send_wr_t wr;
    axon_dev_wc_t wc;

    open_pair();
    Buf mem = dev_.reg(4096, kRemoteAll), msg = dev_.reg(64, kLocalWrite);
    axon_dev_mem_region_t reg = {mem.addr(), mem.mr, 4096};
    axon_dev_mr_t *k = key(4);
    axon_dev_mkey_list_t *objs = list(4);

    ASSERT_EQ(0, post_send_op(a_.qp, 1, AXON_DEV_WR_SEND, msg.ptr, 64, msg.lkey()));
    list_wr(&wr, k, &reg, 1, objs);
    wr.send_flags |= AXON_DEV_SEND_FENCE;
    ASSERT_EQ(0, post_one(a_.qp, &wr));
    usleep(20000);   /* the send is refused (RNR) meanwhile */
    EXPECT_EQ(EBUSY, axon_dev_dealloc_mkey_list(objs));
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "still holds the entries");
    ASSERT_EQ(0, post_recv(b_.qp, 2, msg.ptr, 64, msg.lkey()));
    ASSERT_EQ(2, poll_n(a_.scq, 2, &wc));
    ASSERT_TRUE(poll_one(b_.rcq, &wc));
    lists_.pop_back();
    EXPECT_EQ(0, axon_dev_dealloc_mkey_list(objs));
}

/* ---------------------------------------------------------------- repeat fills */

TEST_F(SoftibUmr, InterleavedFillWriteReadByteExact)
{
    axon_dev_send_wr_t wr;
    size_t repeat = 300;

    open_pair();
    /* two interleaved strided regions (seed §8.8's third figure) and a zero-length entry */
    Buf a = dev_.reg(300 * 200, kRemoteAll), b = dev_.reg(300 * 12, kRemoteAll);
    size_t bc[3] = {64, 0, 12}, st[3] = {200, 4096, 12};
    axon_dev_mem_repeat_block_t blocks[3] = {
        {a.addr(30), a.mr, &bc[0], &st[0]},
        {a.addr(0), a.mr, &bc[1], &st[1]},
        {b.addr(0), b.mr, &bc[2], &st[2]},
    };
    std::vector<Piece> entries = {{a.ptr + 30, 64}, {a.ptr, 0}, {b.ptr, 12}};
    std::vector<Piece> pieces  = repeat_pieces(entries, {200, 4096, 12}, repeat);
    size_t total = repeat * 76;

    axon_dev_mr_t *k = key(3);
    repeat_wr(&wr, k, blocks, 3, &repeat);
    post_expect(&wr);

    Buf src = dev_.reg(total, kLocalWrite), dst = dev_.reg(total, kLocalWrite);
    fill_random(src.ptr, total, 11);
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_WRITE, src, 0, (uint32_t)total, kBase,
                                        k->rkey));
    EXPECT_TRUE(gather(pieces) == std::vector<uint8_t>(src.ptr, src.ptr + total));
    EXPECT_TRUE(untouched_outside(a, pieces));   /* the gaps of the stride */
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_READ, dst, 0, (uint32_t)total, kBase,
                                        k->rkey));
    EXPECT_EQ(0, memcmp(dst.ptr, src.ptr, total));

    /* a window starting mid-repetition, mid-entry */
    std::vector<uint8_t> now = gather(pieces);
    size_t off = 5 * 76 + 40, len = 3000;
    fill_random(src.ptr, len, 12);
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_WRITE, src, 0, (uint32_t)len,
                                        kBase + off, k->rkey));
    memcpy(now.data() + off, src.ptr, len);
    EXPECT_TRUE(gather(pieces) == now);
}

/* shmem_iput's shape: 1024 blocks of 64 bytes, one every 4 KiB + 64, so the blocks move
 * across the pages (the first crosses a boundary) */
TEST_F(SoftibUmr, StridedVectorOfOneEntry)
{
    axon_dev_send_wr_t wr;
    size_t n = 1024, bc = 64, st = 4096 + 64;

    open_pair();
    Buf mem = dev_.reg(n * st, kRemoteAll);
    axon_dev_mem_repeat_block_t block = {mem.addr(4096 - 32), mem.mr, &bc, &st};
    std::vector<Piece> pieces = repeat_pieces({{mem.ptr + 4096 - 32, bc}}, {st}, n);
    axon_dev_mr_t *k = key(1);
    repeat_wr(&wr, k, &block, 1, &n);
    post_expect(&wr);
    Buf src = dev_.reg(n * bc, kLocalWrite);
    fill_random(src.ptr, n * bc, 13);
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_WRITE, src, 0, (uint32_t)(n * bc),
                                        kBase, k->rkey));
    EXPECT_TRUE(gather(pieces) == std::vector<uint8_t>(src.ptr, src.ptr + n * bc));
    EXPECT_TRUE(untouched_outside(mem, pieces));
}

/*
 * A strided vector's blocks of every size around the copy's cases (below 16
 * bytes, 16..32, 33..64, beyond; the MTU a multiple of the block or not),
 * written and read whole, then through a window that starts inside a block
 * and ends inside another: byte-exact, nothing between the blocks touched.
 */
TEST_F(SoftibUmr, StridedBlocksOfEverySize)
{
    const size_t sizes[] = {1, 7, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 100, 256};

    open_pair();
    for (size_t bc : sizes) {
        SCOPED_TRACE("block of " + std::to_string(bc) + " bytes");
        axon_dev_send_wr_t wr;
        size_t n = 4096 / bc + 3, st = bc + 24;
        Buf mem = dev_.reg(n * st, kRemoteAll);
        axon_dev_mem_repeat_block_t block = {mem.addr(0), mem.mr, &bc, &st};
        std::vector<Piece> pieces = repeat_pieces({{mem.ptr, bc}}, {st}, n);
        axon_dev_mr_t *k = key(1);
        repeat_wr(&wr, k, &block, 1, &n);
        post_expect(&wr);
        size_t total = n * bc;
        Buf src = dev_.reg(total, kLocalWrite), dst = dev_.reg(total, kLocalWrite);
        fill_random(src.ptr, total, (unsigned)bc);
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_WRITE, src, 0, (uint32_t)total,
                                            kBase, k->rkey));
        EXPECT_TRUE(gather(pieces) == std::vector<uint8_t>(src.ptr, src.ptr + total));
        EXPECT_TRUE(untouched_outside(mem, pieces));
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_READ, dst, 0, (uint32_t)total,
                                            kBase, k->rkey));
        EXPECT_EQ(0, memcmp(dst.ptr, src.ptr, total));

        std::vector<uint8_t> now = gather(pieces);
        size_t off = bc / 2 + bc, len = total - off - (bc + 1) / 2;
        fill_random(src.ptr, len, (unsigned)bc + 1000);
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_WRITE, src, 0, (uint32_t)len,
                                            kBase + off, k->rkey));
        memcpy(now.data() + off, src.ptr, len);
        EXPECT_TRUE(gather(pieces) == now);
        EXPECT_TRUE(untouched_outside(mem, pieces));
        memset(dst.ptr, 0, total);
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_READ, dst, 0, (uint32_t)len,
                                            kBase + off, k->rkey));
        EXPECT_EQ(0, memcmp(dst.ptr, now.data() + off, len));
        dereg_key(k);
    }
}

/*
 * A strided key over memory that went away under its entry's key (replaced
 * by an inaccessible mapping, as the registration cache's window leaves
 * it): a read through the key sees zeros, a write is lost, neither crashes
 * (softib_guard.h); the key and the pair go on working.
 */
TEST_F(SoftibUmr, StridedKeyOverGoneMemoryNeverCrashes)
{
    axon_dev_send_wr_t wr;
    axon_dev_mr_t     *under = nullptr;
    size_t             n = 256, bc = 40, st = 64, len = n * st, total = n * bc;

    open_pair();
    void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(MAP_FAILED, p);
    memset(p, 0x5a, len);
    ASSERT_EQ(0, axon_dev_reg_mr(dev_.pd, p, len, kRemoteAll, &under));
    axon_dev_mem_repeat_block_t block = {(uintptr_t)p, under, &bc, &st};
    axon_dev_mr_t *k = key(1);
    repeat_wr(&wr, k, &block, 1, &n);
    post_expect(&wr);
    ASSERT_EQ(p, mmap(p, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));

    Buf src = dev_.reg(total, kLocalWrite), dst = dev_.reg(total, kLocalWrite);
    fill_random(src.ptr, total, 3);
    memset(dst.ptr, 0xee, total);
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_WRITE, src, 0, (uint32_t)total,
                                        kBase, k->rkey));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_READ, dst, 0, (uint32_t)total,
                                        kBase, k->rkey));
    EXPECT_EQ(std::vector<uint8_t>(total, 0), std::vector<uint8_t>(dst.ptr, dst.ptr + total));

    /* the pair still moves data through a key over live memory */
    Buf live = dev_.reg(total, kRemoteAll);
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_WRITE, src, 0, (uint32_t)total,
                                        live.addr(), live.rkey()));
    EXPECT_EQ(0, memcmp(live.ptr, src.ptr, total));
    dereg_key(k);
    EXPECT_EQ(0, axon_dev_dereg_mr(under));
    munmap(p, len);
}

/* ---------------------------------------------------------------- ordering, atomics */

TEST_F(SoftibUmr, LaterWrsUseTheKeyWithoutWaiting)
{
    ListLayout l;
    axon_dev_send_wr_t fill, write, read;
    axon_dev_sge_t wsge, rsge;
    axon_dev_wc_t wc[3];

    open_pair();
    make_list(dev_, &l);
    axon_dev_mr_t *k = key();
    Buf src = dev_.reg(l.total, kLocalWrite), dst = dev_.reg(l.total, kLocalWrite);
    fill_random(src.ptr, l.total, 17);
    list_wr(&fill, k, l.regs.data(), (uint32_t)l.regs.size());
    make_wr(&write, &wsge, 1, AXON_DEV_WR_RDMA_WRITE, src.ptr, (uint32_t)l.total, src.lkey());
    write.wr.rdma.remote_addr = kBase;
    write.wr.rdma.rkey        = k->rkey;
    make_wr(&read, &rsge, 2, AXON_DEV_WR_RDMA_READ, dst.ptr, (uint32_t)l.total, dst.lkey());
    read.wr.rdma.remote_addr = kBase;
    read.wr.rdma.rkey        = k->rkey;
    fill.next  = &write;
    write.next = &read;
    ASSERT_EQ(0, post_one(a_.qp, &fill));   /* one post: nothing waits for the fill */
    ASSERT_EQ(3, poll_n(a_.scq, 3, wc));
    EXPECT_EQ(AXON_DEV_WC_UMR, wc[0].opcode);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc[i].status) << i << ": " << wc_status_name(wc[i].status);
    }
    EXPECT_EQ(0, memcmp(dst.ptr, src.ptr, l.total));
    EXPECT_TRUE(gather(l.pieces) == std::vector<uint8_t>(src.ptr, src.ptr + l.total));
}

TEST_F(SoftibUmr, AtomicsLandInTheirEntry)
{
    axon_dev_send_wr_t wr;
    open_pair();
    Buf w1 = dev_.reg(64, kRemoteAll), w2 = dev_.reg(64, kRemoteAll), res = dev_.reg(8, kRemoteAll);
    /* key bytes 0..12 at w1 + 8, 12..32 at w2 + 20 */
    axon_dev_mem_region_t regs[2] = {{w1.addr(8), w1.mr, 12}, {w2.addr(20), w2.mr, 20}};
    axon_dev_mr_t *k = key(2);
    list_wr(&wr, k, regs, 2);
    post_expect(&wr);
    uint64_t v = 40;
    memcpy(w2.ptr + 24, &v, 8);
    axon_dev_wc_t wc;
    ASSERT_EQ(0, post_atomic(a_.qp, 1, AXON_DEV_WR_ATOMIC_FETCH_AND_ADD, res.ptr, res.lkey(),
                             kBase + 16, k->rkey, 2));
    ASSERT_TRUE(poll_one(a_.scq, &wc));
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc.status) << wc_status_name(wc.status);
    memcpy(&v, w2.ptr + 24, 8);
    EXPECT_EQ(42u, v);
    memcpy(&v, res.ptr, 8);
    EXPECT_EQ(40u, v);
    /* key bytes 8..16: four in each entry, no one location to be atomic at */
    ASSERT_EQ(0, post_atomic(a_.qp, 2, AXON_DEV_WR_ATOMIC_CMP_AND_SWP, res.ptr, res.lkey(),
                             kBase + 8, k->rkey, 0, 1));
    ASSERT_TRUE(poll_one(a_.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_REM_ACCESS_ERR, wc.status) << wc_status_name(wc.status);
}

/* ---------------------------------------------------------------- invalidation */

TEST_F(SoftibUmr, InvalidatedKeyIsARemoteAccessError)
{
    ListLayout l;
    axon_dev_send_wr_t wr;

    open_pair();
    make_list(dev_, &l);
    axon_dev_mr_t *k = key();
    Buf src = dev_.reg(l.total, kLocalWrite);
    fill_random(src.ptr, l.total, 19);
    list_wr(&wr, k, l.regs.data(), (uint32_t)l.regs.size());
    post_expect(&wr);
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_WRITE, src, 0, 100, kBase, k->rkey));
    /* a filled key is filled again only after an invalidation */
    invalidate_wr(&wr, k);
    post_expect(&wr);
    list_wr(&wr, k, l.regs.data() + 2, 1, nullptr, kRemoteAll, kBase + 4096);
    post_expect(&wr);
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_WRITE, src, 0, 5000, kBase + 4096,
                                        k->rkey));
    EXPECT_EQ(0, memcmp(l.mem2.ptr + 7, src.ptr, 5000));
    /* the old layout's addresses are gone with it */
    EXPECT_EQ(AXON_DEV_WC_REM_ACCESS_ERR, rdma(AXON_DEV_WR_RDMA_WRITE, src, 0, 8, kBase,
                                               k->rkey));
}

TEST_F(SoftibUmr, UseAfterInvalidationFails)
{
    ListLayout l;
    axon_dev_send_wr_t wr;

    open_pair();
    make_list(dev_, &l);
    axon_dev_mr_t *k = key();
    Buf src = dev_.reg(64, kLocalWrite);
    list_wr(&wr, k, l.regs.data(), (uint32_t)l.regs.size());
    post_expect(&wr);
    invalidate_wr(&wr, k);
    post_expect(&wr);
    EXPECT_EQ(AXON_DEV_WC_REM_ACCESS_ERR, rdma(AXON_DEV_WR_RDMA_READ, src, 0, 64, kBase,
                                               k->rkey));
    EXPECT_EQ(AXON_DEV_QPS_ERR, query_state(a_.qp));
    EXPECT_EQ(0, l.mem.ptr[100]);
}

TEST_F(SoftibUmr, InvalidatedLocalKeyIsALocalProtectionError)
{
    ListLayout l;
    axon_dev_send_wr_t wr;
    axon_dev_wc_t wc;

    open_pair();
    make_list(dev_, &l, kLocalWrite);
    axon_dev_mr_t *k = key(64, kLocalWrite);
    list_wr(&wr, k, l.regs.data(), (uint32_t)l.regs.size(), nullptr, kLocalWrite);
    post_expect(&wr);
    invalidate_wr(&wr, k);
    post_expect(&wr);
    ASSERT_EQ(0, post_send_op(a_.qp, 3, AXON_DEV_WR_SEND, (void *)(uintptr_t)kBase, 64, k->lkey));
    ASSERT_TRUE(poll_one(a_.scq, &wc));
    EXPECT_EQ(AXON_DEV_WC_LOC_PROT_ERR, wc.status) << wc_status_name(wc.status);
}

TEST_F(SoftibUmr, FillOfAFilledKeyFails)
{
    ListLayout l;
    axon_dev_send_wr_t wr;

    open_pair();
    make_list(dev_, &l);
    axon_dev_mr_t *k = key();
    list_wr(&wr, k, l.regs.data(), 1);
    post_expect(&wr);
    post_expect(&wr, AXON_DEV_WC_LOC_PROT_ERR);
    EXPECT_EQ(AXON_DEV_QPS_ERR, query_state(a_.qp));
}

/* ---------------------------------------------------------------- nesting */

TEST_F(SoftibUmr, NestedToTheDepthAndOneBeyond)
{
    axon_dev_send_wr_t wr;
    const unsigned depth = 4;

    open_pair();
    ASSERT_EQ(depth, dev_.attr.umr.max_umr_recursion_depth);
    Buf mem = dev_.reg(8192, kRemoteAll);
    /* level 1: two pieces of memory, out of order; level n: level n-1's halves swapped */
    axon_dev_mem_region_t regs[2] = {{mem.addr(6000), mem.mr, 1000},
                                     {mem.addr(1000), mem.mr, 1000}};
    std::vector<uint8_t *> bytes;   /* where each byte of the last key filled lives */
    for (size_t i = 0; i < 1000; ++i) bytes.push_back(mem.ptr + 6000 + i);
    for (size_t i = 0; i < 1000; ++i) bytes.push_back(mem.ptr + 1000 + i);
    axon_dev_mr_t *k = nullptr;
    for (unsigned level = 1; level <= depth; ++level) {
        k = key(2);
        list_wr(&wr, k, regs, 2, nullptr, kRemoteAll, kBase * level);
        post_expect(&wr);
        if (level > 1) {
            std::rotate(bytes.begin(), bytes.begin() + 1000, bytes.end());
        }
        regs[0] = {kBase * level + 1000, k, 1000};
        regs[1] = {kBase * level, k, 1000};
    }
    /* the deepest key works, byte-exact */
    Buf src = dev_.reg(2000, kLocalWrite), dst = dev_.reg(2000, kLocalWrite);
    fill_random(src.ptr, 2000, 23);
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_WRITE, src, 0, 2000, kBase * depth,
                                        k->rkey));
    for (size_t i = 0; i < 2000; ++i) {
        ASSERT_EQ(src.ptr[i], *bytes[i]) << "byte " << i;
    }
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_READ, dst, 0, 2000, kBase * depth,
                                        k->rkey));
    EXPECT_EQ(0, memcmp(dst.ptr, src.ptr, 2000));
    /* one beyond: refused at post, the limit named */
    axon_dev_mr_t *over = key(2);
    list_wr(&wr, over, regs, 2, nullptr, kRemoteAll, kBase * (depth + 1));
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "max_umr_recursion_depth 4");
}

/* A nesting the post cannot see (the inner key is filled by the WR before): the fill fails */
TEST_F(SoftibUmr, NestingTooDeepAtExecutionFailsTheFill)
{
    axon_dev_send_wr_t wr[2];
    axon_dev_wc_t wc[2];

    open_pair();
    Buf mem = dev_.reg(4096, kRemoteAll);
    axon_dev_mem_region_t reg = {mem.addr(), mem.mr, 4096};
    axon_dev_mr_t *prev = nullptr;
    for (unsigned level = 1; level < dev_.attr.umr.max_umr_recursion_depth; ++level) {
        prev = key(1);
        list_wr(&wr[0], prev, &reg, 1, nullptr, kRemoteAll, kBase);
        post_expect(&wr[0]);
        reg = {kBase, prev, 4096};
    }
    axon_dev_mr_t *deepest = key(1), *beyond = key(1);
    axon_dev_mem_region_t inner = reg, outer = {kBase, deepest, 4096};
    list_wr(&wr[0], deepest, &inner, 1);   /* depth 4: fine */
    list_wr(&wr[1], beyond, &outer, 1);    /* depth 5: only known once wr[0] executed */
    wr[0].next = &wr[1];
    ASSERT_EQ(0, post_one(a_.qp, &wr[0]));
    ASSERT_EQ(2, poll_n(a_.scq, 2, wc));
    EXPECT_EQ(AXON_DEV_WC_SUCCESS, wc[0].status) << wc_status_name(wc[0].status);
    EXPECT_EQ(AXON_DEV_WC_LOC_PROT_ERR, wc[1].status) << wc_status_name(wc[1].status);
}

/* ---------------------------------------------------------------- entries checked on access */

TEST_F(SoftibUmr, EachEntrysRightsAreChecked)
{
    axon_dev_send_wr_t wr;

    open_pair();
    /* the key grants remote write; the second entry's region does not */
    Buf w = dev_.reg(4096, kRemoteAll);
    Buf ro = dev_.reg(4096, AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_READ);
    axon_dev_mem_region_t regs[2] = {{w.addr(), w.mr, 100}, {ro.addr(), ro.mr, 100}};
    axon_dev_mr_t *k = key(2);
    list_wr(&wr, k, regs, 2);
    post_expect(&wr);
    Buf src = dev_.reg(200, kLocalWrite);
    fill_random(src.ptr, 200, 29);
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_WRITE, src, 0, 100, kBase, k->rkey));
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_READ, src, 0, 200, kBase, k->rkey));
    EXPECT_EQ(AXON_DEV_WC_REM_ACCESS_ERR, rdma(AXON_DEV_WR_RDMA_WRITE, src, 0, 8, kBase + 150,
                                               k->rkey));
    EXPECT_EQ(0, ro.ptr[50]);
}

TEST_F(SoftibUmr, KeyRightsAreTheFillsAccess)
{
    axon_dev_send_wr_t wr;

    open_pair();
    Buf mem = dev_.reg(4096, kRemoteAll);
    axon_dev_mem_region_t reg = {mem.addr(), mem.mr, 4096};
    axon_dev_mr_t *k = key(1);
    list_wr(&wr, k, &reg, 1, nullptr, AXON_DEV_ACCESS_LOCAL_WRITE | AXON_DEV_ACCESS_REMOTE_READ);
    post_expect(&wr);
    Buf src = dev_.reg(64, kLocalWrite);
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_READ, src, 0, 64, kBase, k->rkey));
    EXPECT_EQ(AXON_DEV_WC_REM_ACCESS_ERR, rdma(AXON_DEV_WR_RDMA_WRITE, src, 0, 64, kBase,
                                               k->rkey));
}

TEST_F(SoftibUmr, AccessBeyondTheLayoutIsARemoteAccessError)
{
    ListLayout l;
    axon_dev_send_wr_t wr;

    open_pair();
    make_list(dev_, &l);
    axon_dev_mr_t *k = key();
    list_wr(&wr, k, l.regs.data(), (uint32_t)l.regs.size());
    post_expect(&wr);
    Buf src = dev_.reg(l.total + 1, kLocalWrite);
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_READ, src, 0, 1, kBase + l.total - 1,
                                        k->rkey));
    EXPECT_EQ(AXON_DEV_WC_REM_ACCESS_ERR, rdma(AXON_DEV_WR_RDMA_WRITE, src, 0,
                                               (uint32_t)l.total + 1, kBase, k->rkey));
    EXPECT_EQ(0, l.mem.ptr[100]);   /* nothing written: the whole range is checked first */
}

TEST_F(SoftibUmr, DeregisteredEntryIsARemoteAccessError)
{
    axon_dev_send_wr_t wr;

    open_pair();
    Buf m1 = dev_.reg(4096, kRemoteAll), m2 = dev_.reg(4096, kRemoteAll);
    axon_dev_mem_region_t regs[2] = {{m1.addr(), m1.mr, 64}, {m2.addr(), m2.mr, 64}};
    axon_dev_mr_t *k = key(2);
    list_wr(&wr, k, regs, 2);
    post_expect(&wr);
    dev_.dereg(m2);
    Buf src = dev_.reg(128, kLocalWrite);
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_READ, src, 0, 64, kBase, k->rkey));
    EXPECT_EQ(AXON_DEV_WC_REM_ACCESS_ERR, rdma(AXON_DEV_WR_RDMA_READ, src, 0, 128, kBase,
                                               k->rkey));
}

/* ---------------------------------------------------------------- a lossy wire */

class SoftibUmrSlow : public SoftibUmr {};

/*
 * Fills between RDMA WRs of a wire that loses, duplicates and reorders:
 * retransmissions go back past executed fills (which send nothing again),
 * every WR completes in order, every byte lands where its key says.
 */
TEST_F(SoftibUmrSlow, LossyWireFillsBetweenRetransmittedWrs)
{
    const int n = 8;
    const size_t piece = 1700, total = 3 * piece;
    std::vector<axon_dev_send_wr_t> wrs;
    std::vector<axon_dev_sge_t> sges(2 * n);
    std::vector<std::vector<axon_dev_mem_region_t>> regs(n);
    std::vector<axon_dev_wc_t> wc(3 * n);

    env_.set("AXON_SOFTIB_LOSS", "0.1");
    env_.set("AXON_SOFTIB_DUP", "0.1");
    env_.set("AXON_SOFTIB_REORDER", "0.1");
    open_dev();
    ASSERT_EQ(0, dev_.qp(&a_, AXON_DEV_QPT_RC, 1, nullptr, 0, 64, nullptr, nullptr,
                         AXON_DEV_QP_CREATE_UMR, kInline));
    ASSERT_EQ(0, dev_.qp(&b_, AXON_DEV_QPT_RC));
    ASSERT_EQ(0, dev_.up(a_, b_.qpn(), dev_.gid, kPsnB, kPsnA, 10));
    ASSERT_EQ(0, dev_.up(b_, a_.qpn(), dev_.gid, kPsnA, kPsnB, 10));
    Buf mem = dev_.reg(n * 4 * 4096, kRemoteAll);
    Buf src = dev_.reg(n * total, kLocalWrite), dst = dev_.reg(n * total, kLocalWrite);
    fill_random(src.ptr, n * total, 31);
    std::vector<axon_dev_mr_t *> ks;
    for (int i = 0; i < n; ++i) {   /* key i: three pieces of its 16 KiB, in reverse order */
        uint8_t *at = mem.ptr + (size_t)i * 4 * 4096;
        for (int p = 2; p >= 0; --p) {
            regs[i].push_back({(uintptr_t)(at + 100 + (size_t)p * 4096), mem.mr, piece});
        }
        ks.push_back(key(3));
    }
    /* fill 0; then write i, fill i + 1; then every read */
    wrs.resize(3 * n);
    int w = 0;
    list_wr(&wrs[w++], ks[0], regs[0].data(), 3);
    for (int i = 0; i < n; ++i) {
        make_wr(&wrs[w], &sges[i], 100 + i, AXON_DEV_WR_RDMA_WRITE, src.ptr + i * total,
                (uint32_t)total, src.lkey());
        wrs[w].wr.rdma.remote_addr = kBase;
        wrs[w++].wr.rdma.rkey      = ks[i]->rkey;
        if (i + 1 < n) {
            list_wr(&wrs[w++], ks[i + 1], regs[i + 1].data(), 3);
        }
    }
    for (int i = 0; i < n; ++i) {
        make_wr(&wrs[w], &sges[n + i], 200 + i, AXON_DEV_WR_RDMA_READ, dst.ptr + i * total,
                (uint32_t)total, dst.lkey());
        wrs[w].wr.rdma.remote_addr = kBase;
        wrs[w++].wr.rdma.rkey      = ks[i]->rkey;
    }
    for (int i = 0; i + 1 < w; ++i) {
        wrs[i].next = &wrs[i + 1];
    }
    ASSERT_EQ(0, post_one(a_.qp, &wrs[0]));
    ASSERT_EQ(w, poll_n(a_.scq, w, wc.data(), 30.0));
    for (int i = 0; i < w; ++i) {
        ASSERT_EQ(AXON_DEV_WC_SUCCESS, wc[i].status) << i << ": " << wc_status_name(wc[i].status);
        ASSERT_EQ(wrs[i].wr_id, wc[i].wr_id) << "completion " << i << " out of order";
    }
    EXPECT_EQ(0, memcmp(dst.ptr, src.ptr, n * total));
    for (int i = 0; i < n; ++i) {
        for (int p = 0; p < 3; ++p) {
            ASSERT_EQ(0, memcmp((void *)(uintptr_t)regs[i][p].base_addr,
                                src.ptr + i * total + p * piece, piece)) << i << "/" << p;
        }
    }
}

/* ---------------------------------------------------------------- refused at post time */

TEST_F(SoftibUmr, QpWithoutUmrIsRefused)
{
    axon_dev_send_wr_t wr;
    Qp plain, peer;

    open_dev();
    ASSERT_EQ(0, dev_.qp(&plain, AXON_DEV_QPT_RC));
    ASSERT_EQ(0, dev_.qp(&peer, AXON_DEV_QPT_RC));
    ASSERT_EQ(0, dev_.connect(plain, peer));
    Buf mem = dev_.reg(4096, kRemoteAll);
    axon_dev_mem_region_t reg = {mem.addr(), mem.mr, 64};
    axon_dev_mr_t *k = key(1);
    list_wr(&wr, k, &reg, 1);
    EXPECT_EINVAL_LOGS(post_one(plain.qp, &wr), "created without AXON_DEV_QP_CREATE_UMR");
    invalidate_wr(&wr, k);
    EXPECT_EINVAL_LOGS(post_one(plain.qp, &wr), "created without AXON_DEV_QP_CREATE_UMR");
}

TEST_F(SoftibUmr, BadFillsAreRefusedAtPost)
{
    axon_dev_send_wr_t wr;
    axon_dev_pd_t *pd2 = nullptr;

    open_pair(4);
    ASSERT_EQ(0, axon_dev_alloc_pd(dev_.ctx, &pd2));
    Buf mem = dev_.reg(4096, kRemoteAll), other = dev_.reg(4096, kRemoteAll, pd2);
    axon_dev_mr_t *k = key(8), *small = key(1, kLocalWrite);
    axon_dev_mem_region_t regs[8];
    for (auto &r : regs) r = {mem.addr(), mem.mr, 64};

    /* what is filled: an indirect key of the QP's PD */
    list_wr(&wr, mem.mr, regs, 1);
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "is not an indirect key");
    list_wr(&wr, nullptr, regs, 1);
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "is not an indirect key");
    /* the entries */
    list_wr(&wr, k, regs, 0);
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "num_mrs 0");
    list_wr(&wr, small, regs, 2, nullptr, kLocalWrite);
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "num_mrs 2 (key");
    list_wr(&wr, k, regs, 5);
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "5 entries inline, QP");
    list_wr(&wr, k, regs, 2, nullptr);
    wr.send_flags &= ~AXON_DEV_SEND_INLINE;
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "needs memory_objects");
    list_wr(&wr, k, regs, 3, list(2));
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "needs memory_objects");
    list_wr(&wr, k, nullptr, 1);
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "of type 0 with entries");
    list_wr(&wr, k, regs, 1);
    wr.wr.umr.umr_type = 7;
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "of type 7");
    regs[1].mr = nullptr;
    list_wr(&wr, k, regs, 2);
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "entry 1 names no MR");
    regs[1] = {kBase, k, 8};
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "entry 1 names the key it fills");
    regs[1] = {other.addr(), other.mr, 64};
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "entry 1: key");
    regs[1] = {mem.addr(4000), mem.mr, 97};
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "entry 1: 0x");
    regs[1] = {mem.addr() - 1, mem.mr, 1};
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "is outside its MR");
    regs[1] = {mem.addr(), mem.mr, 64};
    /* the rights */
    list_wr(&wr, small, regs, 1, nullptr, kRemoteAll);
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "beyond the key's access_flags");
    list_wr(&wr, k, regs, 1, nullptr, AXON_DEV_ACCESS_REMOTE_ATOMIC);
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "without local write");
    /* repeat: dimensions, count, overlapping repetitions, the region's end */
    size_t bc = 64, st = 64, rep = 64, zero = 0;
    axon_dev_mem_repeat_block_t blk = {mem.addr(), mem.mr, &bc, &st};
    repeat_wr(&wr, k, &blk, 1, &rep);
    wr.wr.umr.mem_list.rb.stride_dim = 2;
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "stride_dim 2");
    repeat_wr(&wr, k, &blk, 1, &zero);
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "repeat_count");
    st = 63;
    repeat_wr(&wr, k, &blk, 1, &rep);
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "byte_count 64 over its stride 63");
    st = 65;
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "is outside its MR");
    blk.stride = nullptr;
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "without byte_count or stride");
    /* counts that overflow: the stride times the repetitions, the layout's size */
    size_t huge = (size_t)1 << 62;
    st = 64;
    blk.stride = &st;
    repeat_wr(&wr, k, &blk, 1, &huge);
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "overflows");
    axon_dev_mr_t *inner = key(1);
    Buf two = dev_.reg(8192, kRemoteAll);
    axon_dev_mem_region_t whole = {two.addr(), two.mr, 8192};
    list_wr(&wr, inner, &whole, 1);
    post_expect(&wr);
    size_t bc2 = 8192, st2 = 8192, many = (dev_.attr.max_mr_size / 8192) + 1;
    axon_dev_mem_repeat_block_t nested = {kBase, inner, &bc2, &st2};
    repeat_wr(&wr, k, &nested, 1, &many);
    EXPECT_EINVAL_LOGS(post_one(a_.qp, &wr), "max_mr_size");
    /* none of them was posted: the QP still works */
    EXPECT_EQ(AXON_DEV_QPS_RTS, query_state(a_.qp));
    dev_.dereg(other);
    EXPECT_EQ(0, axon_dev_dealloc_pd(pd2));
}

/* ---------------------------------------------------------------- another process */

struct UmrPeerInfo {
    uint32_t       qpn;
    uint32_t       rkey;
    axon_dev_gid_t gid;
};

/* The target's interleaved layout: 48 bytes every 112 at +100, 16 every 16 at 32 KiB + 5 */
const size_t kXprocRepeat = 256, kXprocRow = 64, kXprocRegion = 64 * 1024;

/*
 * The target process: fills an interleaved key over its region on the QP
 * the requester connects to, then only sleeps on the socket (its progress
 * thread serves the requester) and checks where the bytes landed.
 */
int umr_xproc_target(int fd, void *arg)
{
    const SoftibWire &cfg = *static_cast<SoftibWire *>(arg);
    EnvGuard       env;
    SoftibDev      dev;
    Qp             q;
    UmrPeerInfo    info, peer;
    axon_dev_mr_t *k = nullptr;
    axon_dev_wc_t  wc;

    softib_wire_env(cfg, 1, &env);
    env.set("AXON_SOFTIB_PROGRESS_THREAD", "y");
    PEER_CHECK(dev.open() == 0, "open");
    Buf region = dev.reg(kXprocRegion, kRemoteAll);
    PEER_CHECK(dev.qp(&q, AXON_DEV_QPT_RC, 1, nullptr, 0, 64, nullptr, nullptr,
                      AXON_DEV_QP_CREATE_UMR, kInline) == 0, "create_qp");
    memset(&info, 0, sizeof(info));
    info.qpn = q.qpn();
    info.gid = dev.gid;
    PEER_CHECK(axon_test_send_blob(fd, &info, sizeof(info)) == 0, "send info");
    PEER_CHECK(recv_struct(fd, &peer) == 0, "recv info");
    PEER_CHECK(dev.up(q, peer.qpn, peer.gid, 0x10, 0x10) == 0, "connect");

    axon_dev_mr_init_attr_t ka;
    memset(&ka, 0, sizeof(ka));
    ka.max_reg_descriptors = 2;
    ka.create_flags        = AXON_DEV_MR_INDIRECT_KLMS;
    ka.access_flags        = kRemoteAll;
    PEER_CHECK(axon_dev_create_mr(dev.pd, &ka, &k) == 0, "create_mr");
    size_t bc[2] = {48, 16}, st[2] = {112, 16}, repeat = kXprocRepeat;
    axon_dev_mem_repeat_block_t blocks[2] = {{region.addr(100), region.mr, &bc[0], &st[0]},
                                             {region.addr(32768 + 5), region.mr, &bc[1], &st[1]}};
    axon_dev_send_wr_t wr;
    repeat_wr(&wr, k, blocks, 2, &repeat);
    PEER_CHECK(post_one(q.qp, &wr) == 0, "post the fill");
    PEER_CHECK(poll_one(q.scq, &wc) && (wc.status == AXON_DEV_WC_SUCCESS), "the fill");
    info.rkey = k->rkey;
    PEER_CHECK(axon_test_send_blob(fd, &info, sizeof(info)) == 0, "send the key");
    PEER_CHECK(axon_test_sync(fd) == 0, "sync: the requester is done");   /* no softib call */

    std::vector<uint8_t> model(kXprocRepeat * kXprocRow);
    axon_test_fill(model.data(), model.size(), 55);
    for (size_t r = 0; r < kXprocRepeat; ++r) {
        PEER_CHECK(!memcmp(region.ptr + 100 + r * 112, &model[r * kXprocRow], 48) &&
                   !memcmp(region.ptr + 32768 + 5 + r * 16, &model[r * kXprocRow + 48], 16),
                   "row %zu not where the layout puts it", r);
    }
    PEER_CHECK(region.ptr[99] == 0 && region.ptr[100 + 48] == 0, "bytes around the rows");
    PEER_CHECK(axon_dev_dereg_mr(k) == 0, "dereg the key");
    return 0;
}

using SoftibUmrXproc = SoftibWithPeer<SoftibUmr, SoftibWire>;

TEST_P(SoftibUmrXproc, KeyOfAnotherProcessWrittenAndRead)
{
    SoftibWire     cfg = GetParam();
    UmrPeerInfo info, mine;
    const size_t total = kXprocRepeat * kXprocRow;

    softib_wire_env(cfg, 0, &env_);
    ASSERT_EQ(0, axon_test_peer_spawn(&peer_, umr_xproc_target, &cfg, 60));
    spawned_ = true;
    open_dev();
    ASSERT_EQ(0, dev_.qp(&a_, AXON_DEV_QPT_RC));
    ASSERT_EQ(0, recv_struct(peer_.fd, &info));
    memset(&mine, 0, sizeof(mine));
    mine.qpn = a_.qpn();
    mine.gid = dev_.gid;
    ASSERT_EQ(0, axon_test_send_blob(peer_.fd, &mine, sizeof(mine)));
    ASSERT_EQ(0, dev_.up(a_, info.qpn, info.gid, 0x10, 0x10));
    ASSERT_EQ(0, recv_struct(peer_.fd, &info));

    Buf src = dev_.reg(total, kLocalWrite), dst = dev_.reg(total, kLocalWrite);
    axon_test_fill(src.ptr, total, 55);
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_WRITE, src, 0, (uint32_t)total, kBase,
                                        info.rkey));
    ASSERT_EQ(AXON_DEV_WC_SUCCESS, rdma(AXON_DEV_WR_RDMA_READ, dst, 0, (uint32_t)total, kBase,
                                        info.rkey));
    EXPECT_EQ(0, memcmp(dst.ptr, src.ptr, total));
    /* one byte past the layout: the target refuses it */
    EXPECT_EQ(AXON_DEV_WC_REM_ACCESS_ERR, rdma(AXON_DEV_WR_RDMA_READ, dst, 0, 2,
                                               kBase + total - 1, info.rkey));
    ASSERT_EQ(0, axon_test_sync(peer_.fd));
    EXPECT_EQ(0, axon_test_peer_wait(&peer_, 60)) << "the target failed (see its stderr)";
    spawned_ = false;
}

INSTANTIATE_TEST_SUITE_P(Wire, SoftibUmrXproc, ::testing::ValuesIn(kSoftibPeerWires),
                         softib_wire_name);

}  // namespace
