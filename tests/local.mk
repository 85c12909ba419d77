# tests/: googletest suites, the peer-process harness and test plugins.
if HAVE_GTEST
check_PROGRAMS += tests/axon_gtest
# An Axon program started by a PMIx launcher (tests/mpi/run_mpi_tests.sh runs it under mpirun).
check_PROGRAMS += tests/axon_job_check
tests_axon_job_check_SOURCES = tests/mpi/axon_job_check.c
tests_axon_job_check_LDADD   = libaxon.la
# The sources mirror the tree they test: tests/gtest/<folder>/test_*.cc tests <folder>;
# headers shared across folders are in tests/harness.
tests_axon_gtest_SOURCES = \
	tests/harness/harness.c \
	tests/harness/harness.h \
	tests/harness/gtest_pch.hh \
	tests/harness/env_guard.h \
	tests/harness/log_capture.h \
	tests/harness/tag_env.h \
	tests/harness/rma_env.h \
	tests/harness/layout_cases.h \
	tests/harness/layout_wire.h \
	tests/harness/topo_env.h \
	tests/gtest/api/coll/coll_env.h \
	tests/gtest/api/coll/coll_proc.h \
	tests/gtest/api/coll/test_coll.cc \
	tests/gtest/api/coll/test_coll_args.cc \
	tests/gtest/api/coll/test_coll_dt.cc \
	tests/gtest/api/coll/test_coll_fault.cc \
	tests/gtest/api/coll/test_coll_netns.cc \
	tests/gtest/api/coll/test_coll_offload.cc \
	tests/gtest/api/coll/test_coll_team.cc \
	tests/gtest/api/core/test_bad_input.cc \
	tests/gtest/api/core/test_job.cc \
	tests/gtest/api/core/test_peer_failure.cc \
	tests/gtest/api/core/test_request_runs.cc \
	tests/gtest/api/core/test_worker_wait.cc \
	tests/gtest/api/mem/test_mem.cc \
	tests/gtest/api/rma/test_rma.cc \
	tests/gtest/api/rma/test_rma_device.cc \
	tests/gtest/api/rma/test_rma_layout.cc \
	tests/gtest/api/rma/test_rma_layout_key.cc \
	tests/gtest/api/rma/test_rma_proto.cc \
	tests/gtest/api/rma/test_rma_rails.cc \
	tests/gtest/api/tag/test_tag.cc \
	tests/gtest/api/tag/test_tag_ext.cc \
	tests/gtest/api/tag/test_tag_layout.cc \
	tests/gtest/api/tag/test_tag_match.cc \
	tests/gtest/api/tag/test_tag_rails.cc \
	tests/gtest/api/tag/rails_rc_probe.c \
	tests/gtest/api/tag/rails_rc_probe.h \
	tests/gtest/components/ofi/test_ofi.cc \
	tests/gtest/components/ofi/test_ofi_rma.cc \
	tests/gtest/components/rdmacm/test_rdmacm.cc \
	tests/gtest/components/shm/test_shm.cc \
	tests/gtest/components/shm/test_shm_mem_seg.cc \
	tests/gtest/components/shm/test_shm_numa.cc \
	tests/gtest/components/shm/test_shm_mem_share.cc \
	tests/gtest/components/tcp/test_tcp.cc \
	tests/gtest/components/verbs/rcache_probe.h \
	tests/gtest/components/verbs/test_rc_layout.cc \
	tests/gtest/components/verbs/test_rc_rcache.cc \
	tests/gtest/components/verbs/test_verbs_dc.cc \
	tests/gtest/components/verbs/test_verbs_rc.cc \
	tests/gtest/components/verbs/test_verbs_tag.cc \
	tests/gtest/components/verbs/test_verbs_ud.cc \
	tests/gtest/framework/test_amo_cpu.cc \
	tests/gtest/framework/test_component_am.cc \
	tests/gtest/framework/test_config.cc \
	tests/gtest/framework/test_idle.cc \
	tests/gtest/framework/test_loader.cc \
	tests/gtest/framework/test_select.cc \
	tests/gtest/framework/topo/test_topo.cc \
	tests/gtest/framework/memory/test_rcache.cc \
	tests/gtest/framework/device/test_device.cc \
	tests/gtest/framework/device/rdmacore/test_rdmacore_cm.cc \
	tests/gtest/framework/device/softib/softib_env.h \
	tests/gtest/framework/device/softib/test_softib_active.cc \
	tests/gtest/framework/device/softib/test_softib_cm.cc \
	tests/gtest/framework/device/softib/test_softib_data.cc \
	tests/gtest/framework/device/softib/test_softib_device.cc \
	tests/gtest/framework/device/softib/test_softib_engine.cc \
	tests/gtest/framework/device/softib/test_softib_errors.cc \
	tests/gtest/framework/device/softib/test_softib_ext_atomic.cc \
	tests/gtest/framework/device/softib/test_softib_opcode.cc \
	tests/gtest/framework/device/softib/test_softib_qp_state.cc \
	tests/gtest/framework/device/softib/test_softib_ud.cc \
	tests/gtest/framework/device/softib/test_softib_wire.cc \
	tests/gtest/framework/device/softib/test_softib_xchannel.cc \
	tests/gtest/framework/device/softib/test_softib_dc.cc \
	tests/gtest/framework/device/softib/test_softib_umr.cc \
	tests/gtest/framework/device/softib/test_softib_unmapped.cc \
	tests/gtest/framework/device/softib/test_softib_xproc.cc \
	tests/gtest/framework/device/softib/test_softib_mcast.cc \
	tests/gtest/fuzz/test_fuzz_regressions.cc \
	$(axon_fuzz_harness_sources) \
	components/shm/shm_mem_seg.c \
	components/shm/shm_mem_share.c \
	components/shm/shm_mem_table.c
# (shm's segments and mapping table are tested directly, white box: shm_md.h)
tests_axon_gtest_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir) -I$(top_srcdir)/tests -I$(top_srcdir)/tests/harness $(GTEST_CFLAGS) \
	-I$(top_srcdir)/components/shm \
	-DAXON_TEST_BUILDDIR='"$(abs_top_builddir)"' \
	-DAXON_TEST_SRCDIR='"$(abs_top_srcdir)"' \
	-DAXON_TEST_PLUGIN_DIR='"$(abs_top_builddir)/tests/plugins/.libs"'
tests_gtest_cxxflags      = -std=gnu++14 -Wall -Wno-missing-field-initializers
tests_axon_gtest_CXXFLAGS = $(tests_gtest_cxxflags) -include tests/harness/gtest_pch.hh
tests_axon_gtest_CFLAGS   = $(AX_CFLAGS)
tests_axon_gtest_LDADD    = libaxon.la $(GTEST_LIBS) -lpthread
if HAVE_LIBFABRIC
# The libfabric provider "axon", driven through libfabric (contrib/ofi_provider).
tests_axon_gtest_SOURCES += tests/gtest/contrib/ofi_provider/test_ofi_provider.cc \
	tests/gtest/contrib/ofi_provider/test_ofi_provider_iov.cc \
	tests/gtest/contrib/ofi_provider/test_ofi_provider_rma.cc \
	tests/gtest/contrib/ofi_provider/test_ofi_provider_atomic.cc \
	tests/gtest/contrib/ofi_provider/test_ofi_provider_event.cc \
	tests/gtest/contrib/ofi_provider/test_ofi_provider_event_words.cc \
	tests/gtest/contrib/ofi_provider/ofi_event_env.h \
	tests/gtest/contrib/ofi_provider/test_ofi_provider_cq_data.cc \
	tests/gtest/contrib/ofi_provider/test_ofi_provider_cntr.cc \
	tests/gtest/contrib/ofi_provider/test_ofi_provider_progress.cc \
	tests/gtest/contrib/ofi_provider/ofi_test_node.h \
	tests/gtest/contrib/ofi_provider/test_ofi_domain_lock.cc \
	tests/gtest/contrib/ofi_provider/dlock_probe.c \
	tests/gtest/contrib/ofi_provider/dlock_probe.h \
	contrib/ofi_provider/axon_fi_mutex.c
# (the provider's domain lock is tested directly, white box: dlock_probe.h)
tests_axon_gtest_LDADD   += -ldl  # libfabric itself is dlopen'ed (see the test)
endif
if HAVE_IBVERBS
# framework/device/test_device.cc checks the rdma-core back end against libibverbs itself.
tests_axon_gtest_LDADD   += $(IBVERBS_LIBS)
endif

# googletest and the C++ headers, precompiled once with the sources' own flags.
# GCC takes tests/harness/gtest_pch.hh.gch (build tree) for the -include above
# when the flags match, and parses the header from the source tree otherwise.
tests_gtest_pch = tests/harness/gtest_pch.hh.gch
$(tests_gtest_pch): $(top_srcdir)/tests/harness/gtest_pch.hh
	@$(MKDIR_P) tests/harness
	$(AM_V_CXX)$(CXX) $(DEFS) $(DEFAULT_INCLUDES) $(INCLUDES) $(tests_axon_gtest_CPPFLAGS) \
		$(CPPFLAGS) $(tests_gtest_cxxflags) $(CXXFLAGS) -x c++-header -c $< -o $@
$(am_tests_axon_gtest_OBJECTS): $(tests_gtest_pch)
CLEANFILES += $(tests_gtest_pch)

# Plugins that must fail to load: one misses a symbol, one has the wrong ABI.
check_LTLIBRARIES += tests/plugins/libaxon_broken.la tests/plugins/libaxon_badabi.la
tests_plugins_libaxon_broken_la_SOURCES = tests/plugins/broken_component.c
tests_plugins_libaxon_broken_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
tests_plugins_libaxon_badabi_la_SOURCES = tests/plugins/badabi_component.c
tests_plugins_libaxon_badabi_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
endif

EXTRA_DIST += tests/sanitizers/lsan.supp tests/sanitizers/valgrind.supp
EXTRA_DIST += tests/run_tests.sh tests/test_names.sh tests/README.md tests/tools_test.sh tests/softib_verbs_test.sh \
	tests/soak_test.sh contrib/bench/soak.sh \
	tests/softib_verbs/verbs_abi_check.c tests/softib_verbs/rdmacm_abi_check.c \
	tests/softib_verbs/rdmacm_sync_check.c \
	contrib/softib/devnodes.sh \
	tests/layering/check_layers.sh \
	tests/layering/check_layers_test.sh tests/harness/bounded.sh tests/harness/bounded_test.sh \
	tests/harness/script_check.sh tests/harness/run_tests_test.sh \
	contrib/bench/compare.sh \
	contrib/bench/ep_mem.sh contrib/bench/dc_goals.sh contrib/bench/layout_compare.sh contrib/bench/rma_compare.sh \
	contrib/bench/bench_lib.sh \
	contrib/bench/mpi_compare.sh contrib/bench/osu_compare.sh contrib/bench/osc_compare.sh \
	contrib/bench/shmem_compare.sh contrib/bench/shmem_lat.c contrib/bench/softib_compare.sh \
	tests/mpi/run_mpi_tests.sh tests/mpi/session.sh tests/mpi/mpi_check.h \
	tests/mpi/osc_win.h tests/mpi/osc_ops.h tests/mpi/osc_fence.c tests/mpi/osc_lock.c \
	tests/mpi/osc_pscw.c tests/mpi/osc_lat.c tests/mpi/osc_busy.c \
	tests/mpi/any_source.c tests/mpi/busy.c tests/mpi/cancel.c tests/mpi/coll.c \
	tests/mpi/comm.c tests/mpi/lat.c tests/mpi/mprobe.c tests/mpi/pingpong.c \
	tests/mpi/probe.c tests/mpi/ssend.c tests/mpi/storm.c tests/mpi/threads.c \
	tests/mpi/truncate.c tests/mpi/ring.c tests/ofi/run_fabtests.sh \
	tests/ofi/fabtests_notrun.txt tests/shmem/run_sos_tests.sh tests/shmem/sos_cache.sh \
	tests/shmem/sos_selection.txt tests/shmem/sos_baseline.txt
TESTS += tests/run_tests.sh
