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
/*
 * Take every free memory registration of the device under the endpoint's
 * iface but `leave` (its domain's next `leave` registrations succeed, the
 * one after fails; the registrations of memory unmapped since are dropped
 * first): a handle for axon_test_rc_mrs_release, NULL when the device never
 * refused.
 */
void    *axon_test_rc_ep_fill_mrs(void *tl_ep, unsigned leave);
void     axon_test_rc_mrs_release(void *fill);

#ifdef __cplusplus
}
#endif

#endif
