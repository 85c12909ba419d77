/* A job's ranks and worker addresses from its launcher (framework/bootstrap). */
#include <string.h>
#include "axon_int.h"
#include "bootstrap.h"
#include "log.h"

axon_status_t axon_job_bootstrap(axon_worker_h worker, axon_job_t *job)
{
    axon_bootstrap_job_t bj;
    axon_status_t status;

    if ((worker == NULL) || (job == NULL)) {
        axon_error("axon_job_bootstrap: NULL %s", (worker == NULL) ? "worker" : "job");
        return AXON_ERR_INVALID_PARAM;
    }
    memset(job, 0, sizeof(*job));
    status = axon_bootstrap_exchange(worker->address, worker->address_length, &bj);
    if (status != AXON_OK) {
        return status;
    }
    /* What the launcher hands back for us must be what we published. */
    if ((bj.rank >= bj.size) || (bj.lengths[bj.rank] != worker->address_length) ||
        (memcmp(bj.blobs[bj.rank], worker->address, worker->address_length) != 0)) {
        axon_error("axon_job_bootstrap: the launcher returned another address for our rank %u "
                   "of %u", bj.rank, bj.size);
        axon_bootstrap_release(&bj);
        return AXON_ERR_IO_FORMAT;
    }
    job->rank            = bj.rank;
    job->size            = bj.size;
    job->addresses       = bj.blobs;
    job->address_lengths = bj.lengths;
    return AXON_OK;
}

void axon_job_release(axon_job_t *job)
{
    axon_bootstrap_job_t bj;

    if ((job == NULL) || (job->addresses == NULL)) {
        return;
    }
    bj.rank    = job->rank;
    bj.size    = job->size;
    bj.blobs   = job->addresses;
    bj.lengths = job->address_lengths;
    bj.joined  = 1;   /* a job with addresses came from a session that is still open */
    axon_bootstrap_release(&bj);
    memset(job, 0, sizeof(*job));
}
