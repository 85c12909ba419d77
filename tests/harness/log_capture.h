/*
 * Test helpers of the gtest suites: a watchdog that bounds a test's time,
 * a capture of the library's log lines (kept off the terminal, warnings
 * and errors recorded) for the test's duration, and of what one call writes
 * to stderr (bad input must be an error plus a line naming the bad value).
 */
#ifndef AXON_TEST_LOG_CAPTURE_H
#define AXON_TEST_LOG_CAPTURE_H

#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "harness.h"
extern "C" {
#include "log.h"
}

/* Bounds a test's time: the process dies of SIGALRM if it hangs. */
struct Watchdog {
    explicit Watchdog(unsigned sec) { alarm(sec); }
    ~Watchdog() { alarm(0); }
};

/*
 * Captures log lines (and keeps them off the terminal) for a test's
 * duration: warnings and errors, or every line up to keep (the level is
 * raised to it for the scope; axon_init sets it again from AXON_LOG_LEVEL).
 */
struct LogCapture {
    std::vector<std::string> lines;
    axon_log_level_t         saved;
    axon_log_level_t         keep;

    explicit LogCapture(axon_log_level_t keep_up_to = AXON_LOG_WARN)
        : saved(axon_log_level), keep(keep_up_to)
    {
        axon_log_set_hook(hook, this);
        axon_log_set_file("/dev/null");
        if (keep > axon_log_level) {
            axon_log_set_level(keep);
        }
    }
    ~LogCapture()
    {
        axon_log_set_hook(NULL, NULL);
        axon_log_set_file("stderr");
        axon_log_set_level(saved);
    }
    static void hook(axon_log_level_t level, const char *message, void *arg)
    {
        LogCapture *self = static_cast<LogCapture*>(arg);

        if (level <= self->keep) {
            self->lines.push_back(message);
        }
    }
    /* Does a line contain text (and also, if given, also)? */
    bool any_contains(const char *text, const char *also = "") const
    {
        for (const std::string &line : lines) {
            if ((line.find(text) != std::string::npos) &&
                (line.find(also) != std::string::npos)) {
                return true;
            }
        }
        return false;
    }
};

/* Runs fn with stderr captured; returns what was written. */
template <typename Fn>
std::string capture_stderr(Fn fn)
{
    if (axon_test_stderr_capture_begin() != 0) {
        ADD_FAILURE() << "cannot capture stderr";
        fn();
        return "";
    }
    fn();
    char       *text = axon_test_stderr_capture_end();
    std::string out(text ? text : "");
    free(text);
    return out;
}

/* A device call given bad input: EINVAL and a log line containing _words. */
#define EXPECT_EINVAL_LOGS(_call, _words)                                               \
    do {                                                                                \
        int         _ret = -1;                                                          \
        std::string _log = capture_stderr([&] { _ret = (_call); });                     \
        EXPECT_EQ(EINVAL, _ret) << #_call;                                              \
        EXPECT_NE(std::string::npos, _log.find(_words)) << #_call << " logged: " << _log; \
    } while (0)

#endif
