# tests/fuzz/: libFuzzer harnesses for every parser of outside data.
# The seed tool is always built (so it keeps compiling, and the regression
# gtest shares its table); the clang fuzzers only with --enable-fuzzing.
# The harness bodies and seed makers (the gtest links them too).
axon_fuzz_harness_sources = tests/fuzz/fuzz.h tests/fuzz/fuzz_seeds.c \
	tests/fuzz/fuzz_worker_address.c tests/fuzz/fuzz_rkey_unpack.c \
	tests/fuzz/fuzz_tcp_frame.c components/tcp/tcp_wire.c tests/fuzz/fuzz_config_value.c \
	tests/fuzz/fuzz_softib_pkt.c tests/fuzz/fuzz_softib_cm.c tests/fuzz/fuzz_ud_packet.c \
	tests/fuzz/fuzz_rc_handshake.c tests/fuzz/fuzz_shm_segment.c components/shm/shm_seg.c \
	tests/fuzz/fuzz_softib_ring.c
check_PROGRAMS += tests/fuzz/fuzz_seeds
if HAVE_LIBFABRIC
axon_fuzz_harness_sources += tests/fuzz/fuzz_ofi_key_blob.c contrib/ofi_provider/axon_fi_wire.c
axon_fuzz_libfabric = yes
endif
tests_fuzz_fuzz_seeds_SOURCES = tests/fuzz/fuzz_seeds_main.c $(axon_fuzz_harness_sources)
tests_fuzz_fuzz_seeds_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir) -I$(top_srcdir)/tests/fuzz
tests_fuzz_fuzz_seeds_LDADD   = libaxon.la

EXTRA_DIST += tests/fuzz/fuzz.mk tests/fuzz/fuzz_main.c tests/fuzz/run_fuzzers.sh \
	tests/fuzz/regressions

# make fuzz: the harnesses; make fuzz-run [FUZZ_TIME=s]: each fuzzer for s seconds.
FUZZ_TIME ?= 5
if ENABLE_FUZZING
fuzz: tests/fuzz/fuzz_seeds
	$(MAKE) -f $(abs_top_srcdir)/tests/fuzz/fuzz.mk top_srcdir=$(abs_top_srcdir) \
	    top_builddir=$(abs_top_builddir) FUZZ_CC="$(FUZZ_CC)" \
	    HAVE_LIBFABRIC=$(axon_fuzz_libfabric)
fuzz-run: fuzz
	bash $(abs_top_srcdir)/tests/fuzz/run_fuzzers.sh $(abs_top_builddir) $(FUZZ_TIME)
else
fuzz fuzz-run:
	@echo "the fuzzers need a build configured with --enable-fuzzing (and clang)" >&2; exit 1
endif
.PHONY: fuzz fuzz-run
