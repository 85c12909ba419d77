/*
 * Job bootstrap through PMIx (bootstrap.h): PMIx_Init, the job size from
 * the wildcard rank, our blob put under one key, a fence that collects
 * the data, and a get per rank. PMIx counts its inits, so an application
 * that uses PMIx too (MPI) keeps its own session.
 */
#include <stdlib.h>
#include <string.h>
#include <pmix.h>
#include "bootstrap.h"
#include "log.h"

#define AXON_BOOTSTRAP_KEY "axon.address"

static axon_status_t axon_bootstrap_failed(const char *what, pmix_status_t rc)
{
    axon_error("bootstrap: %s failed: %s", what, PMIx_Error_string(rc));
    return (rc == PMIX_ERR_UNREACH) ? AXON_ERR_UNREACHABLE : AXON_ERR_IO_ERROR;
}

/* Every rank's blob, ours included (it went through the launcher too). */
static axon_status_t axon_bootstrap_get_all(const pmix_proc_t *self, axon_bootstrap_job_t *job)
{
    pmix_value_t *value;
    pmix_proc_t   proc;
    pmix_status_t rc;
    uint32_t      r;

    job->blobs   = calloc(job->size, sizeof(*job->blobs));
    job->lengths = calloc(job->size, sizeof(*job->lengths));
    if ((job->blobs == NULL) || (job->lengths == NULL)) {
        axon_error("bootstrap: out of memory for %u addresses", job->size);
        return AXON_ERR_NO_MEMORY;
    }
    for (r = 0; r < job->size; ++r) {
        PMIX_LOAD_PROCID(&proc, self->nspace, r);
        rc = PMIx_Get(&proc, AXON_BOOTSTRAP_KEY, NULL, 0, &value);
        if (rc != PMIX_SUCCESS) {
            return axon_bootstrap_failed("PMIx_Get of a rank's address", rc);
        }
        if ((value->type != PMIX_BYTE_OBJECT) || (value->data.bo.size == 0) ||
            ((job->blobs[r] = malloc(value->data.bo.size)) == NULL)) {
            axon_error("bootstrap: rank %u published no address (type %d)", r, value->type);
            PMIX_VALUE_RELEASE(value);
            return AXON_ERR_IO_FORMAT;
        }
        memcpy(job->blobs[r], value->data.bo.bytes, value->data.bo.size);
        job->lengths[r] = value->data.bo.size;
        PMIX_VALUE_RELEASE(value);
    }
    return AXON_OK;
}

axon_status_t axon_bootstrap_exchange(const void *blob, size_t length, axon_bootstrap_job_t *job)
{
    pmix_proc_t   self, wildcard;
    pmix_value_t  mine, *value;
    pmix_info_t   collect;
    pmix_status_t rc;
    bool          yes = true;
    axon_status_t status;

    memset(job, 0, sizeof(*job));
    rc = PMIx_Init(&self, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        axon_error("bootstrap: no PMIx server to join (%s): start the job with a PMIx "
                   "launcher (mpirun, prterun, srun --mpi=pmix)", PMIx_Error_string(rc));
        return (rc == PMIX_ERR_UNREACH) ? AXON_ERR_UNREACHABLE : AXON_ERR_IO_ERROR;
    }
    job->joined = 1;
    PMIX_LOAD_PROCID(&wildcard, self.nspace, PMIX_RANK_WILDCARD);
    rc = PMIx_Get(&wildcard, PMIX_JOB_SIZE, NULL, 0, &value);
    if (rc != PMIX_SUCCESS) {
        status = axon_bootstrap_failed("PMIx_Get(PMIX_JOB_SIZE)", rc);
        goto err;
    }
    job->rank = self.rank;
    job->size = value->data.uint32;
    PMIX_VALUE_RELEASE(value);

    PMIX_VALUE_CONSTRUCT(&mine);
    mine.type          = PMIX_BYTE_OBJECT;
    mine.data.bo.bytes = (char *)blob;
    mine.data.bo.size  = length;
    rc = PMIx_Put(PMIX_GLOBAL, AXON_BOOTSTRAP_KEY, &mine);
    rc = (rc == PMIX_SUCCESS) ? PMIx_Commit() : rc;
    if (rc != PMIX_SUCCESS) {
        status = axon_bootstrap_failed("PMIx_Put/PMIx_Commit of our address", rc);
        goto err;
    }
    PMIX_INFO_LOAD(&collect, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    rc = PMIx_Fence(&wildcard, 1, &collect, 1);
    PMIX_INFO_DESTRUCT(&collect);
    if (rc != PMIX_SUCCESS) {
        status = axon_bootstrap_failed("PMIx_Fence", rc);
        goto err;
    }
    status = axon_bootstrap_get_all(&self, job);
    if (status != AXON_OK) {
        goto err;
    }
    axon_debug("bootstrap: rank %u of %u (namespace %s)", job->rank, job->size, self.nspace);
    return AXON_OK;

err:
    axon_bootstrap_release(job);
    return status;
}

void axon_bootstrap_release(axon_bootstrap_job_t *job)
{
    uint32_t r;
    int joined = job->joined;

    if (job->blobs != NULL) {
        for (r = 0; r < job->size; ++r) {
            free(job->blobs[r]);
        }
    }
    free(job->blobs);
    free(job->lengths);
    memset(job, 0, sizeof(*job));
    if (joined) {
        PMIx_Finalize(NULL, 0);
    }
}
