# libFuzzer harnesses (GNU make; `make fuzz` in a build configured with
# --enable-fuzzing runs it): each harness is built with clang from its own
# file, fuzz_main.c and only the Axon sources its parser needs, so fuzzing
# costs no second build of the library. Fuzzers land in tests/fuzz/bin/ of
# the build tree, objects in tests/fuzz/obj/ (a source two harnesses share
# is compiled once).
FUZZ_CC     ?= clang
FUZZ_SAN     = -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS  = -std=gnu11 -g -O1 -fno-omit-frame-pointer $(FUZZ_SAN) -fsanitize=fuzzer-no-link
FUZZ_CPPFLAGS = -I$(top_builddir) -I$(top_srcdir) -I$(top_srcdir)/api -I$(top_srcdir)/framework \
	-I$(top_srcdir)/framework/device -I$(top_srcdir)/framework/device/rdmacore \
	-I$(top_srcdir)/framework/memory -I$(top_srcdir)/framework/topo -I$(top_srcdir)/api/core -I$(top_srcdir)/api/tag \
	-I$(top_srcdir)/api/rma -I$(top_srcdir)/api/mem -I$(top_srcdir)/api/coll \
	-I$(top_srcdir)/tests/fuzz
out = tests/fuzz

# The Axon sources behind each harness's parser (log.c: fuzz_main.c silences the log; the
# ud, rc and softib ring checks are inline in their headers).
fuzz_worker_address_src = api/core/address.c framework/log.c
fuzz_rkey_unpack_src     = api/mem/rkey_format.c framework/log.c framework/sys.c
fuzz_tcp_frame_src       = components/tcp/tcp_wire.c framework/log.c
fuzz_config_value_src    = framework/config.c framework/log.c
fuzz_config_value_libs   = -lm
fuzz_softib_pkt_src      = framework/device/softib/softib_pkt.c framework/log.c
fuzz_softib_cm_src       = framework/device/softib/softib_cm_msg.c framework/log.c
fuzz_ofi_key_blob_src    = contrib/ofi_provider/axon_fi_wire.c api/mem/rkey_format.c \
	framework/log.c framework/sys.c
fuzz_ud_packet_src       = framework/log.c
fuzz_rc_handshake_src    = framework/log.c
# (topo_none.c: a fuzzed segment is never created here, so never placed on a node)
fuzz_shm_segment_src     = components/shm/shm_seg.c framework/log.c framework/sys.c \
	framework/proc.c framework/topo/topo_none.c framework/topo/topo_parse.c
fuzz_softib_ring_src     = framework/log.c

FUZZ_HARNESSES = worker_address rkey_unpack tcp_frame config_value softib_pkt \
	softib_cm ud_packet rc_handshake shm_segment softib_ring
# The provider's headers need libfabric's (configure found it: HAVE_LIBFABRIC=yes).
ifeq ($(HAVE_LIBFABRIC),yes)
FUZZ_HARNESSES += ofi_key_blob
endif

all: $(FUZZ_HARNESSES:%=$(out)/bin/fuzz_%)

$(out)/obj/%.o: $(top_srcdir)/%.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@

define fuzz_harness
$(out)/bin/fuzz_$(1): $(out)/obj/tests/fuzz/fuzz_$(1).o $(fuzz_$(1)_src:%.c=$(out)/obj/%.o) \
		$(top_srcdir)/tests/fuzz/fuzz_main.c
	@mkdir -p $(out)/bin
	$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer \
		-DAXON_FUZZ_ENTRY=axon_fuzz_$(1) $$(filter %.o %.c,$$^) -o $$@ $(fuzz_$(1)_libs)
endef
$(foreach h,$(FUZZ_HARNESSES),$(eval $(call fuzz_harness,$(h))))

-include $(shell find $(out)/obj -name '*.d' 2>/dev/null)

.PHONY: all
