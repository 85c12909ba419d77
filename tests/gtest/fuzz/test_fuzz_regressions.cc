/*
 * The fuzz harnesses' bodies (tests/fuzz/) run in the normal suite: every
 * seed Axon makes must parse, and every input a fuzzer once crashed on,
 * kept in tests/fuzz/regressions/<harness>/, must be handled (the ASan pass
 * checks each under the sanitizers, as the fuzzer did).
 */
#include <dirent.h>
#include <stdio.h>
#include <string>
#include <vector>
#include <gtest/gtest.h>
#include "fuzz/fuzz.h"

namespace {

class FuzzRegressions : public ::testing::TestWithParam<unsigned> {
protected:
    const axon_fuzz_harness_t &harness() const { return axon_fuzz_harnesses[GetParam()]; }
};

std::vector<uint8_t> read_file(const std::string &path)
{
    std::vector<uint8_t> data;
    FILE *file = fopen(path.c_str(), "rb");
    int c;

    if (file != NULL) {
        while ((c = fgetc(file)) != EOF) {
            data.push_back((uint8_t)c);
        }
        fclose(file);
    }
    return data;
}

struct Seeds {
    std::vector<std::vector<uint8_t>> inputs;
};

int collect_seed(const void *data, size_t size, void *arg)
{
    const uint8_t *bytes = (const uint8_t *)data;

    ((Seeds *)arg)->inputs.emplace_back(bytes, bytes + size);
    return 0;
}

TEST_P(FuzzRegressions, AxonsOwnSeedsAreAccepted)
{
    Seeds seeds;

    ASSERT_EQ(0, harness().seeds(collect_seed, &seeds));
    ASSERT_FALSE(seeds.inputs.empty());
    for (size_t i = 0; i < seeds.inputs.size(); ++i) {
        EXPECT_EQ(0, harness().entry(seeds.inputs[i].data(), seeds.inputs[i].size()))
            << harness().name << " seed " << i << " of " << seeds.inputs[i].size()
            << " bytes was refused";
    }
}

TEST_P(FuzzRegressions, KeptCrashInputsAreHandled)
{
    std::string dir = std::string(AXON_TEST_SRCDIR "/tests/fuzz/regressions/") + harness().name;
    DIR *d = opendir(dir.c_str());
    struct dirent *ent;
    unsigned count = 0;

    if (d == NULL) {
        GTEST_SKIP() << "no input kept for " << harness().name << " (" << dir << ")";
    }
    while ((ent = readdir(d)) != NULL) {
        if (ent->d_name[0] == '.') {
            continue;
        }
        std::vector<uint8_t> input = read_file(dir + "/" + ent->d_name);
        SCOPED_TRACE(ent->d_name);
        /* Accepted or refused, as long as it is handled: the sanitizers judge the rest. */
        int verdict = harness().entry(input.data(), input.size());
        EXPECT_TRUE((verdict == 0) || (verdict == 1)) << verdict;
        ++count;
    }
    closedir(d);
    EXPECT_GT(count, 0u) << dir << " is empty: remove it or keep the input";
}

std::string harness_name(const ::testing::TestParamInfo<unsigned> &info)
{
    return axon_fuzz_harnesses[info.param].name;
}

INSTANTIATE_TEST_SUITE_P(Harnesses, FuzzRegressions,
                         ::testing::Range(0u, axon_fuzz_num_harnesses), harness_name);

}  // namespace
