# api/: what MPI/SHMEM call; protocols are chosen here. One folder per concern:
#   core/  context, worker, endpoint, request, peer, address: no protocol by name
#   tag/   tag matching, eager and rendezvous sends, receives
#   rma/   put/get/flush/fence, atomics, the active-message path for them
#   mem/   mapped memory and its keys
#   coll/  teams and collectives, above the protocols (they use tag's spaces)
# The public headers stay here: they are installed.
AM_CPPFLAGS += -I$(top_srcdir)/api/core -I$(top_srcdir)/api/tag -I$(top_srcdir)/api/rma \
               -I$(top_srcdir)/api/mem -I$(top_srcdir)/api/coll

libaxon_la_SOURCES += api/protocols.c

include $(top_srcdir)/api/core/local.mk
include $(top_srcdir)/api/tag/local.mk
include $(top_srcdir)/api/rma/local.mk
include $(top_srcdir)/api/mem/local.mk
include $(top_srcdir)/api/coll/local.mk
