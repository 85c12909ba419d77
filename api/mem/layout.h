/*
 * Layouts (axon_layout_t, axon.h) inside the library: the one place they are
 * checked, and a cursor that walks one in packed order, for the protocols'
 * gather (send, put) and scatter (receive, get). A cursor is a value on the
 * stack or in a request: walking a layout never allocates.
 */
#ifndef AXON_LAYOUT_H
#define AXON_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include "axon.h"
#include "component.h"

/* Internal kind: an axon_iov_t list of absolute addresses (axon_put_iov_nb), in iov.pieces. */
#define AXON_LAYOUT_ABS_IOV 0x100

/*
 * Check a layout given to func: a known kind, nested at most two deep, no
 * count or size overflowing, no NULL piece list with pieces; with dest (it
 * receives data) no two pieces overlapping. On success *size_p is its
 * packed size. Errors are logged naming the bad value.
 */
axon_status_t axon_layout_check(const axon_layout_t *layout, int dest, size_t *size_p,
                                const char *func);

/* The AXON_REQ_FLAG_LAYOUT argument of func: checked, and its size the call's length. */
axon_status_t axon_layout_param_check(const axon_request_param_t *param, size_t length, int dest,
                                      const char *func);

/* Where a walk is: the piece holding packed offset pos, for nested layouts at two levels. */
typedef struct axon_layout_cursor {
    const axon_layout_t *layout;
    uint8_t             *base;
    size_t               block_size;  /* strided with block: packed bytes of one block */
    /* The iov level (top or inner): its piece index and the packed offset it starts at. */
    size_t               piece;
    size_t               piece_pos;
    size_t               block;       /* the strided block piece/piece_pos refer to */
} axon_layout_cursor_t;

void     axon_layout_cursor_init(axon_layout_cursor_t *cursor, const axon_layout_t *layout,
                                 const void *base);
/*
 * The contiguous run at packed offset pos: its address, and in *length_p the
 * bytes to its end (0 at or past the end of the data). Walking forward is
 * cheap; going back restarts an iov level from its start.
 */
uint8_t *axon_layout_cursor_run(axon_layout_cursor_t *cursor, size_t pos, size_t *length_p);
/* Copy length packed bytes from pos out of the layout into dest. */
void     axon_layout_gather(axon_layout_cursor_t *cursor, size_t pos, void *dest, size_t length);
/* Copy length bytes from src into the layout from packed offset pos. */
void     axon_layout_scatter(axon_layout_cursor_t *cursor, size_t pos, const void *src,
                             size_t length);

/* A copy of layout owning its piece lists, in one allocation (free() it). NULL: no memory. */
axon_layout_t *axon_layout_dup(const axon_layout_t *layout);

/*
 * layout (checked, size bytes, based at base) as a memory domain takes it
 * (component.h): a strided top level with a forward stride in the repeat
 * form, anything else a list of its runs. The entries go to room when they
 * fit its room_len, else to an array *entries_p for the caller to free
 * (NULL when room held them).
 */
axon_status_t axon_layout_md_make(const axon_layout_t *layout, const void *base, size_t size,
                                  axon_md_layout_entry_t *room, uint32_t room_len,
                                  axon_md_layout_t *md, axon_md_layout_entry_t **entries_p);

#endif
