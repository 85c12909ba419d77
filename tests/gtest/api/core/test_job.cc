/*
 * axon_job_bootstrap outside a launcher: a clear status and a log line at
 * once, nothing left allocated (the launched case runs under mpirun:
 * tests/mpi/axon_job_check.c, from run_mpi_tests.sh).
 */
#include <gtest/gtest.h>

#include "axon.h"
#include "harness.h"
#include "log_capture.h"

namespace {

TEST(Job, WithoutLauncherFailsClearly)
{
    axon_test_node_t node = {};
    axon_job_t       job;

    ASSERT_EQ(AXON_OK, axon_test_node_create(&node, "self", NULL, 0));
    unsetenv("PMIX_SERVER_URI41");   /* no launcher's server to find, whatever ran us */
    unsetenv("PMIX_SERVER_URI4");
    unsetenv("PMIX_SERVER_URI3");
    unsetenv("PMIX_SERVER_URI2");
    unsetenv("PMIX_NAMESPACE");
    LogCapture    log;
    double        start = axon_test_time();
    axon_status_t st    = axon_job_bootstrap(node.worker, &job);
    EXPECT_TRUE((st == AXON_ERR_UNREACHABLE) || (st == AXON_ERR_UNSUPPORTED))
        << axon_status_string(st);
    EXPECT_LT(axon_test_time() - start, 10.0) << "waited for a launcher that is not there";
    EXPECT_TRUE(log.any_contains("bootstrap")) << "failed without a log line";
    EXPECT_EQ(nullptr, job.addresses);
    axon_job_release(&job);   /* nothing to release: harmless */
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_job_bootstrap(nullptr, &job));
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_job_bootstrap(node.worker, nullptr));
    axon_test_node_destroy(&node);
}

}  // namespace
