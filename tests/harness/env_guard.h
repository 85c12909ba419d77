/*
 * EnvGuard: sets environment variables for a scope and puts back what was
 * there before (value or absence). Forked peers inherit what is set.
 * In an unnamed namespace, like the other test headers.
 */
#ifndef AXON_TEST_ENV_GUARD_H
#define AXON_TEST_ENV_GUARD_H

#include <stdlib.h>

#include <map>
#include <string>
#include <utility>

namespace {

class EnvGuard {
public:
    EnvGuard() {}
    EnvGuard(const char *name, const char *value) { set(name, value); }
    EnvGuard(const EnvGuard &) = delete;
    EnvGuard &operator=(const EnvGuard &) = delete;

    ~EnvGuard()
    {
        for (auto &it : saved_) {
            if (it.second.first) {
                setenv(it.first.c_str(), it.second.second.c_str(), 1);
            } else {
                unsetenv(it.first.c_str());
            }
        }
    }

    /* value nullptr: unset for the scope. The first value seen is what comes back. */
    void set(const char *name, const char *value)
    {
        if (saved_.find(name) == saved_.end()) {
            const char *old = getenv(name);
            saved_[name]    = std::make_pair(old != nullptr, std::string(old ? old : ""));
        }
        if (value != nullptr) {
            setenv(name, value, 1);
        } else {
            unsetenv(name);
        }
    }

private:
    std::map<std::string, std::pair<bool, std::string>> saved_;
};

} // namespace

#endif
