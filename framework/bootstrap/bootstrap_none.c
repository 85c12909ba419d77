/* Job bootstrap in a build without PMIx (bootstrap.h): nothing to join. */
#include <string.h>
#include "bootstrap.h"
#include "log.h"

axon_status_t axon_bootstrap_exchange(const void *blob, size_t length, axon_bootstrap_job_t *job)
{
    (void)blob;
    (void)length;
    memset(job, 0, sizeof(*job));
    axon_error("bootstrap: this Axon was built without PMIx (configure found no pmix.pc)");
    return AXON_ERR_UNSUPPORTED;
}

void axon_bootstrap_release(axon_bootstrap_job_t *job)
{
    memset(job, 0, sizeof(*job));
}
