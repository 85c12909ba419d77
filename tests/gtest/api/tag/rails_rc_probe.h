/*
 * White box, for the rails tests: what an rc lane's connection did, and
 * breaking it. In C (rails_rc_probe.c), since rc's headers are C only.
 */
#ifndef AXON_TEST_RAILS_RC_PROBE_H
#define AXON_TEST_RAILS_RC_PROBE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Work requests the rc transport endpoint's connection posted (reads included). */
uint64_t axon_test_rc_ep_posted(const void *tl_ep);
/* Is the connection up (its handshake done)? */
int      axon_test_rc_ep_connected(const void *tl_ep);
/* Move the connection's QP to the error state, as a broken link would: 0 or an errno. */
int      axon_test_rc_ep_break(void *tl_ep);

#ifdef __cplusplus
}
#endif

#endif
