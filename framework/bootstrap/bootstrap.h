/*
 * Job bootstrap: what a process learns from the launcher that started it
 * (its rank, the job's size) and the exchange of one blob per process
 * (a worker address) across the job. PMIx is the one launcher interface
 * (Open MPI's mpirun, prterun, srun --mpi=pmix); a build without PMIx
 * reports AXON_ERR_UNSUPPORTED.
 */
#ifndef AXON_BOOTSTRAP_H
#define AXON_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>
#include "axon_status.h"

typedef struct axon_bootstrap_job {
    uint32_t  rank;
    uint32_t  size;
    void    **blobs;    /* size blobs by rank (malloc'd), blobs[rank] a copy of ours */
    size_t   *lengths;
    int       joined;   /* the launcher's session is open: release leaves it */
} axon_bootstrap_job_t;

/*
 * Collective over the job: publish blob under this process's rank (put,
 * commit), wait for every process (fence, collecting the data), read
 * every rank's. AXON_ERR_UNREACHABLE (logged) without a launcher's server,
 * AXON_ERR_UNSUPPORTED without PMIx in this build, AXON_ERR_IO_ERROR when
 * the launcher fails an exchange (a process died). The PMIx session stays
 * open until axon_bootstrap_release.
 */
axon_status_t axon_bootstrap_exchange(const void *blob, size_t length, axon_bootstrap_job_t *job);
void          axon_bootstrap_release(axon_bootstrap_job_t *job);

#endif
