/* Component loader: search path, plugins that cannot load, first-found-wins. */
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <sys/stat.h>
#include <unistd.h>

extern "C" {
#include "axon_int.h"
#include "loader.h"
#include "log.h"
}

namespace {

struct log_capture {
    std::vector<std::pair<axon_log_level_t, std::string>> lines;

    static void hook(axon_log_level_t level, const char *msg, void *arg)
    {
        static_cast<log_capture *>(arg)->lines.emplace_back(level, msg);
    }
    log_capture()  { axon_log_set_hook(hook, this); }
    ~log_capture() { axon_log_set_hook(NULL, NULL); }

    bool has(axon_log_level_t level, const std::string &a, const std::string &b = "") const
    {
        for (const auto &l : lines) {
            if ((l.first == level) && (l.second.find(a) != std::string::npos) &&
                (l.second.find(b) != std::string::npos)) {
                return true;
            }
        }
        return false;
    }
};

class Loader : public ::testing::Test {
protected:
    axon_component_set_t set = {NULL, 0};
    axon_config_names_t  path = {NULL, 0};
    std::vector<char *>  path_storage;

    void set_path(const std::vector<std::string> &dirs)
    {
        for (const auto &d : dirs) {
            path_storage.push_back(strdup(d.c_str()));
        }
        path.names = path_storage.data();
        path.count = (unsigned)path_storage.size();
    }

    void TearDown() override
    {
        axon_loader_unload_all(&set);
        for (char *p : path_storage) {
            free(p);
        }
    }

    const axon_loaded_component_t *find(const char *name) const
    {
        for (unsigned i = 0; i < set.count; ++i) {
            if (strcmp(set.comps[i].name, name) == 0) {
                return &set.comps[i];
            }
        }
        return NULL;
    }
};

std::string make_temp_dir()
{
    char tmpl[] = "/tmp/axon-loader-XXXXXX";
    return std::string(mkdtemp(tmpl));
}

} // namespace

TEST_F(Loader, FindsSelfAndShmInBuildTree)
{
    ASSERT_EQ(AXON_OK, axon_loader_load_all(&path, NULL, 0, NULL, 0, &set));
    const axon_loaded_component_t *self = find("self"), *shm = find("shm");
    ASSERT_NE(nullptr, self);
    ASSERT_NE(nullptr, shm);
    EXPECT_NE(nullptr, self->component);
    EXPECT_NE(nullptr, shm->component);
    EXPECT_EQ(1u, self->num_resources);
    EXPECT_EQ(1u, shm->num_resources);
    EXPECT_STREQ("shm", shm->resources[0].tl_name);
    EXPECT_EQ(AXON_DEV_TYPE_SHM, shm->resources[0].dev_type);
    EXPECT_TRUE(shm->resources[0].cap_flags & AXON_CAP_AM_SHORT);
    EXPECT_GT(shm->resources[0].bandwidth_MBps, 0);
    EXPECT_GT(shm->resources[0].max_bcopy, shm->resources[0].max_short);
}

TEST_F(Loader, UnloadablePluginsAreSkippedAndOthersLoad)
{
    log_capture logs;

    set_path({AXON_TEST_PLUGIN_DIR});
    ASSERT_EQ(AXON_OK, axon_loader_load_all(&path, NULL, 0, NULL, 0, &set));

    const axon_loaded_component_t *broken = find("broken"), *badabi = find("badabi");
    ASSERT_NE(nullptr, broken);
    EXPECT_EQ(nullptr, broken->component);
    EXPECT_EQ(nullptr, broken->dl_handle);
    ASSERT_NE(nullptr, broken->error);
    EXPECT_NE(nullptr, strstr(broken->error, "axon_test_symbol_that_does_not_exist"));

    ASSERT_NE(nullptr, badabi);
    EXPECT_EQ(nullptr, badabi->component);
    ASSERT_NE(nullptr, badabi->error);
    EXPECT_NE(nullptr, strstr(badabi->error, "ABI"));

    /* Skipping is a debug line naming dlerror(), never an error. */
    EXPECT_TRUE(logs.has(AXON_LOG_DEBUG, "broken", "axon_test_symbol_that_does_not_exist"));
    EXPECT_FALSE(logs.has(AXON_LOG_ERROR, "broken"));

    ASSERT_NE(nullptr, find("self"));
    ASSERT_NE(nullptr, find("shm"));
    EXPECT_NE(nullptr, find("shm")->component);
    EXPECT_EQ(1u, find("self")->num_resources);
}

TEST_F(Loader, SearchDirsUserPathFirstThenLibraryDir)
{
    axon_config_names_t dirs;

    set_path({"/opt/a", "/opt/b"});
    ASSERT_EQ(AXON_OK, axon_loader_search_dirs(&path, &dirs));
    ASSERT_GE(dirs.count, 4u);
    EXPECT_STREQ("/opt/a", dirs.names[0]);
    EXPECT_STREQ("/opt/b", dirs.names[1]);
    std::string lib_dir(dirs.names[2]);
    EXPECT_EQ("/axon", lib_dir.substr(lib_dir.size() - 5));
    axon_config_names_release(&dirs);
}

TEST_F(Loader, FirstPluginOfANameWins)
{
    std::string dir = make_temp_dir();
    std::string link = dir + "/libaxon_self.so";
    /* A "self" that cannot load, found before the real one. */
    ASSERT_EQ(0, symlink(AXON_TEST_PLUGIN_DIR "/libaxon_broken.so", link.c_str()));

    set_path({dir});
    ASSERT_EQ(AXON_OK, axon_loader_load_all(&path, NULL, 0, NULL, 0, &set));
    const axon_loaded_component_t *self = find("self");
    ASSERT_NE(nullptr, self);
    EXPECT_EQ(link, std::string(self->path));
    EXPECT_EQ(nullptr, self->component);
    EXPECT_NE(nullptr, find("shm")->component);

    unlink(link.c_str());
    rmdir(dir.c_str());
}

TEST_F(Loader, DescriptorNameMustMatchFileName)
{
    std::string dir = make_temp_dir();
    std::string link = dir + "/libaxon_other.so";
    ASSERT_EQ(0, symlink(AXON_TEST_BUILDDIR "/components/self/.libs/libaxon_self.so",
                         link.c_str()));

    set_path({dir});
    ASSERT_EQ(AXON_OK, axon_loader_load_all(&path, NULL, 0, NULL, 0, &set));
    const axon_loaded_component_t *other = find("other");
    ASSERT_NE(nullptr, other);
    EXPECT_EQ(nullptr, other->component);
    ASSERT_NE(nullptr, other->error);
    EXPECT_NE(nullptr, strstr(other->error, "self"));

    unlink(link.c_str());
    rmdir(dir.c_str());
}

TEST_F(Loader, NonPluginFilesAndMissingDirsAreIgnored)
{
    std::string dir = make_temp_dir();
    for (const char *name : {"libaxon_.so", "libfoo.so", "libaxon_x.so.1", "axon_y.so"}) {
        std::string f = dir + "/" + name;
        FILE *fp = fopen(f.c_str(), "w");
        ASSERT_NE(nullptr, fp);
        fclose(fp);
    }

    set_path({"/nonexistent/axon/dir", dir});
    ASSERT_EQ(AXON_OK, axon_loader_load_all(&path, NULL, 0, NULL, 0, &set));
    for (unsigned i = 0; i < set.count; ++i) {
        EXPECT_NE(0, strcmp(set.comps[i].name, "")) << set.comps[i].path;
        EXPECT_EQ(std::string::npos, std::string(set.comps[i].path).find(dir))
            << "picked up " << set.comps[i].path;
    }
    EXPECT_NE(nullptr, find("shm"));

    for (const char *name : {"libaxon_.so", "libfoo.so", "libaxon_x.so.1", "axon_y.so"}) {
        unlink((dir + "/" + name).c_str());
    }
    rmdir(dir.c_str());
}

TEST_F(Loader, BadComponentConfigFailsTheLoad)
{
    log_capture logs;
    axon_config_kv_t kv[] = {{"SHM_FIFO_SIZE", "lots"}};

    EXPECT_EQ(AXON_ERR_INVALID_PARAM, axon_loader_load_all(&path, kv, 1, NULL, 0, &set));
    EXPECT_EQ(0u, set.count);
    EXPECT_TRUE(logs.has(AXON_LOG_ERROR, "AXON_SHM_FIFO_SIZE", "lots"));
}

/* Through the public API: a broken plugin on the path does not stop the job. */
TEST(LoaderContext, BrokenPluginOnPathDoesNotStopOthers)
{
    axon_config_kv_t kv[] = {{"COMPONENT_PATH", AXON_TEST_PLUGIN_DIR}, {"TLS", "self"}};
    axon_context_params_t params = {AXON_FEATURE_TAG, kv, 2};
    axon_context_h ctx;
    axon_worker_h worker;
    axon_ep_h ep;
    void *addr;
    size_t addr_len;
    char out[16] = "", in[16] = "hello";
    axon_request_h req = NULL;

    ASSERT_EQ(AXON_OK, axon_init(&params, &ctx));
    ASSERT_EQ(AXON_OK, axon_worker_create(ctx, NULL, &worker));
    ASSERT_EQ(AXON_OK, axon_worker_get_address(worker, &addr, &addr_len));
    axon_ep_params_t ep_params = {addr, addr_len};
    ASSERT_EQ(AXON_OK, axon_ep_create(worker, &ep_params, &ep));
    ASSERT_EQ(AXON_OK, axon_tag_send_nb(ep, in, 6, 42, NULL, &req));
    ASSERT_EQ(AXON_OK, axon_tag_recv_nb(worker, out, sizeof(out), 42, AXON_TAG_MASK_FULL, NULL,
                                        &req));
    EXPECT_STREQ("hello", out);
    EXPECT_EQ(AXON_OK, axon_ep_close_nb(ep, AXON_EP_CLOSE_FLUSH, &req));
    axon_worker_release_address(worker, addr);
    axon_worker_destroy(worker);
    axon_cleanup(ctx);
}

TEST(LoaderContext, NamingAnUnloadablePluginInTlsWarns)
{
    log_capture logs;
    axon_config_kv_t kv[] = {{"COMPONENT_PATH", AXON_TEST_PLUGIN_DIR}, {"TLS", "shm,broken"}};
    axon_context_params_t params = {AXON_FEATURE_TAG, kv, 2};
    axon_context_h ctx;

    ASSERT_EQ(AXON_OK, axon_init(&params, &ctx));
    EXPECT_TRUE(logs.has(AXON_LOG_WARN, "broken", "axon_test_symbol_that_does_not_exist"));
    EXPECT_EQ(1u, ctx->num_rscs);
    EXPECT_STREQ("shm", ctx->rscs[0].resource->tl_name);
    axon_cleanup(ctx);
}

TEST(LoaderContext, OnlyUnloadablePluginsInTlsFailInit)
{
    log_capture logs;
    axon_config_kv_t kv[] = {{"COMPONENT_PATH", AXON_TEST_PLUGIN_DIR}, {"TLS", "badabi"}};
    axon_context_params_t params = {AXON_FEATURE_TAG, kv, 2};
    axon_context_h ctx;

    EXPECT_EQ(AXON_ERR_NO_ELEM, axon_init(&params, &ctx));
    EXPECT_TRUE(logs.has(AXON_LOG_WARN, "badabi", "ABI"));
}

/*
 * A transport AXON_TLS excludes is not queried (querying opens its devices:
 * a softib device is a socket, a segment and a thread), by its name or an
 * alias, in an allow list or a deny list; those it admits are.
 */
TEST(LoaderContext, TransportsExcludedByTlsAreNotQueried)
{
    struct Case {
        const char              *tls;
        std::vector<std::string> queried, not_queried;
    };
    const Case cases[] = {
        {"self", {"self"}, {"shm", "tcp", "rc", "ud", "dc", "rdmacm"}},
        {"sm", {"shm", "self"}, {"tcp", "rc", "ud", "dc", "rdmacm"}},
        {"ib", {"rc", "ud", "dc"}, {"shm", "self", "tcp", "rdmacm"}},
        {"^shm,tcp,rdmacm", {"self", "rc", "ud", "dc"}, {"shm", "tcp", "rdmacm"}},
        {"all", {"self", "shm", "tcp", "rc", "ud", "dc", "rdmacm"}, {}},
    };

    for (const Case &c : cases) {
        log_capture logs;
        axon_config_kv_t kv[] = {{"TLS", c.tls}, {"LOG_LEVEL", "debug"}};
        axon_context_params_t params = {AXON_FEATURE_TAG, kv, 2};
        axon_context_h ctx;

        ASSERT_EQ(AXON_OK, axon_init(&params, &ctx)) << c.tls;
        for (const std::string &name : c.not_queried) {
            EXPECT_TRUE(logs.has(AXON_LOG_DEBUG, "'" + name + "' not queried", "AXON_TLS"))
                << "AXON_TLS=" << c.tls << ": " << name;
        }
        for (const std::string &name : c.queried) {
            EXPECT_FALSE(logs.has(AXON_LOG_DEBUG, "'" + name + "' not queried"))
                << "AXON_TLS=" << c.tls << ": " << name;
        }
        /* shm, self and tcp (loopback) exist on every host: queried, they list a resource. */
        for (unsigned i = 0; i < ctx->comps.count; ++i) {
            const axon_loaded_component_t *lc = &ctx->comps.comps[i];
            bool host_wide = !strcmp(lc->name, "shm") || !strcmp(lc->name, "self") ||
                             !strcmp(lc->name, "tcp");
            bool asked = std::find(c.queried.begin(), c.queried.end(), lc->name) !=
                         c.queried.end();
            if (host_wide) {
                EXPECT_EQ(asked, lc->num_resources > 0) << "AXON_TLS=" << c.tls << ": "
                                                        << lc->name;
            }
        }
        axon_cleanup(ctx);
    }
}
