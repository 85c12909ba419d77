/*
 * Every rank but 0 sends to rank 0, which receives with wildcards:
 *   1. MPI_ANY_SOURCE + MPI_ANY_TAG: the status names the sender and tag the
 *      payload says, and each sender's messages arrive in the order sent
 *      (MPI's non-overtaking rule), small and rendezvous sizes mixed;
 *   2. MPI_ANY_SOURCE with a given tag, taking the second tag first;
 *   3. a given source with MPI_ANY_TAG, senders in reverse order.
 */
#include "mpi_check.h"

#define COUNT     40
#define BIG       (256u << 10)   /* above every eager limit */

/* The header every message starts with; the rest is patterned. */
typedef struct {
    int sender;
    int seq;
    int tag;
    int size;
} msg_head_t;

static size_t size_of(int seq)
{
    return seq % 10 == 9 ? BIG + (size_t)seq : sizeof(msg_head_t) + (size_t)(seq * 13 % 200);
}

static void send_one(unsigned char *buf, int seq, int tag)
{
    msg_head_t h = { mt_rank, seq, tag, (int)size_of(seq) };

    mt_fill(buf, (size_t)h.size, (unsigned)mt_rank, (unsigned)seq);
    memcpy(buf, &h, sizeof(h));
    MT_MPI(MPI_Send(buf, h.size, MPI_BYTE, 0, tag, MPI_COMM_WORLD));
}

/* Checks a received message against its header and the status; returns the header. */
static msg_head_t check_one(const char *phase, const unsigned char *buf, const MPI_Status *st)
{
    msg_head_t h;
    char what[96];
    int count = -1;

    memcpy(&h, buf, sizeof(h));
    MPI_Get_count(st, MPI_BYTE, &count);
    snprintf(what, sizeof(what), "%s: message %d of rank %d", phase, h.seq, h.sender);
    MT_CHECK(h.sender == st->MPI_SOURCE, "%s: status.MPI_SOURCE %d", what, st->MPI_SOURCE);
    MT_CHECK(h.tag == st->MPI_TAG, "%s: status.MPI_TAG %d, expected %d", what, st->MPI_TAG,
             h.tag);
    MT_CHECK(count == h.size && (size_t)h.size == size_of(h.seq),
             "%s: count %d, expected %zu", what, count, size_of(h.seq));
    if (count == h.size && h.sender > 0 && h.sender < mt_size) {
        unsigned char *copy = mt_malloc((size_t)count);

        /* the header overwrote the pattern's first bytes: compare the rest */
        mt_fill(copy, (size_t)count, (unsigned)h.sender, (unsigned)h.seq);
        MT_CHECK(memcmp(copy + sizeof(h), buf + sizeof(h), (size_t)count - sizeof(h)) == 0,
                 "%s: payload differs", what);
        free(copy);
    }
    return h;
}

static void phase_any_any(unsigned char *buf)
{
    int next[64] = { 0 };
    MPI_Status st;
    int i;

    if (mt_rank != 0) {
        for (i = 0; i < COUNT; i++) {
            send_one(buf, i, 100 + (i * 7 + mt_rank) % 50);  /* tags vary */
        }
        return;
    }
    for (i = 0; i < COUNT * (mt_size - 1); i++) {
        msg_head_t h;

        MT_MPI(MPI_Recv(buf, (int)(BIG + COUNT), MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG,
                        MPI_COMM_WORLD, &st));
        h = check_one("any source, any tag", buf, &st);
        if (st.MPI_SOURCE > 0 && st.MPI_SOURCE < mt_size && st.MPI_SOURCE < 64) {
            MT_CHECK(h.seq == next[st.MPI_SOURCE], "any source, any tag: from rank %d "
                     "message %d arrived when %d was next (order broken)", st.MPI_SOURCE,
                     h.seq, next[st.MPI_SOURCE]);
            next[st.MPI_SOURCE] = h.seq + 1;
        }
    }
    for (i = 1; i < mt_size && i < 64; i++) {
        MT_CHECK(next[i] == COUNT, "any source, any tag: %d messages of rank %d, expected %d",
                 next[i], i, COUNT);
    }
}

static void phase_any_source(unsigned char *buf)
{
    MPI_Status st;
    int i, tag;

    if (mt_rank != 0) {
        send_one(buf, 0, 201);
        send_one(buf, 9, 202);  /* a rendezvous size */
        return;
    }
    /* all of tag 202 first: the tag 201 messages before them must wait */
    for (tag = 202; tag >= 201; tag--) {
        int seen = 0;

        for (i = 1; i < mt_size; i++) {
            msg_head_t h;

            MT_MPI(MPI_Recv(buf, (int)(BIG + COUNT), MPI_BYTE, MPI_ANY_SOURCE, tag,
                            MPI_COMM_WORLD, &st));
            h = check_one("any source, tag given", buf, &st);
            MT_CHECK(h.tag == tag, "any source, tag %d: got a message of tag %d", tag, h.tag);
            if (h.sender > 0 && h.sender < 31) {
                MT_CHECK(!(seen & (1 << h.sender)), "any source, tag %d: rank %d twice", tag,
                         h.sender);
                seen |= 1 << h.sender;
            }
        }
    }
}

static void phase_any_tag(unsigned char *buf)
{
    MPI_Status st;
    int src, i;

    if (mt_rank != 0) {
        for (i = 0; i < 3; i++) {
            send_one(buf, i * 4 + 1, 300 + i * mt_rank);
        }
        return;
    }
    for (src = mt_size - 1; src >= 1; src--) {
        for (i = 0; i < 3; i++) {
            msg_head_t h;

            MT_MPI(MPI_Recv(buf, (int)(BIG + COUNT), MPI_BYTE, src, MPI_ANY_TAG,
                            MPI_COMM_WORLD, &st));
            h = check_one("source given, any tag", buf, &st);
            MT_CHECK(h.sender == src && h.seq == i * 4 + 1 && st.MPI_TAG == 300 + i * src,
                     "source %d, any tag: got message %d of rank %d tag %d, expected message "
                     "%d tag %d", src, h.seq, h.sender, st.MPI_TAG, i * 4 + 1, 300 + i * src);
        }
    }
}

int main(int argc, char **argv)
{
    unsigned char *buf;

    mt_init(&argc, &argv, "any_source", 3, 30);
    buf = mt_malloc(BIG + COUNT);
    mt_step("%s", "phase 1: MPI_ANY_SOURCE + MPI_ANY_TAG");
    phase_any_any(buf);
    MPI_Barrier(MPI_COMM_WORLD);
    mt_step("%s", "phase 2: MPI_ANY_SOURCE, tag given");
    phase_any_source(buf);
    MPI_Barrier(MPI_COMM_WORLD);
    mt_step("%s", "phase 3: source given, MPI_ANY_TAG");
    phase_any_tag(buf);
    free(buf);
    return mt_finish();
}
