/*
 * libFuzzer's entry for one harness, chosen at build time
 * (-DAXON_FUZZ_ENTRY=axon_fuzz_<name>, tests/fuzz/fuzz.mk).
 */
#include <stdlib.h>
#include "fuzz.h"
#include "log.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    /* Refusals are logged: formatted (the fuzzer checks the log lines too), not printed. */
    if (getenv("AXON_FUZZ_LOG") == NULL) {
        axon_log_set_file("/dev/null");
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    AXON_FUZZ_ENTRY(data, size);
    return 0;
}
