/*
 * Precompiled for every test source (tests/local.mk: -include): googletest
 * and the C++ library headers most of them use. Parsing these took about a
 * second of each file's compile, 76 files in each of two builds (plain and
 * ASan) on a 2-core CI machine. Library and harness headers stay out: a
 * source must still include what it uses, and without the .gch (another
 * compiler, other flags) this file is just parsed.
 */
#ifndef AXON_TESTS_GTEST_PCH_HH
#define AXON_TESTS_GTEST_PCH_HH

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#endif
