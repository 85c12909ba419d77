/* Configuration tables, value parsers and logging. */
#include <gtest/gtest.h>

#include <climits>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <unistd.h>

extern "C" {
#include "config.h"
#include "log.h"
}

namespace {

typedef struct {
    char                     *name;
    int                       enabled;
    unsigned                  count;
    size_t                    fifo_size;
    double                    timeout;
    unsigned                  mode;
    axon_config_allow_list_t  tls;
    axon_config_names_t       devices;
    axon_config_names_t       path;
} test_opts_t;

const char *const test_modes[] = {"poll", "Busy", "sleep", NULL};

/* Only the TESTCFG_ prefix is used, so no real AXON_ variable is touched. */
const axon_config_entry_t test_table[] = {
    {"NAME", "hello", "A plain string.", offsetof(test_opts_t, name),
     AXON_CONFIG_TYPE_STRING},
    {"ENABLE", "yes", "Turn the feature on.", offsetof(test_opts_t, enabled),
     AXON_CONFIG_TYPE_BOOL},
    {"COUNT", "7", "How many.", offsetof(test_opts_t, count),
     AXON_CONFIG_TYPE_UINT},
    {"FIFO_SIZE", "8k", "Bytes in the fifo.", offsetof(test_opts_t, fifo_size),
     AXON_CONFIG_TYPE_SIZE},
    {"TIMEOUT", "10ms", "How long to wait.", offsetof(test_opts_t, timeout),
     AXON_CONFIG_TYPE_TIME},
    {"MODE", "poll", "Progress mode.", offsetof(test_opts_t, mode),
     AXON_CONFIG_TYPE_ENUM(test_modes, "poll|busy|sleep")},
    {"TLS", "all", "Transports to use.", offsetof(test_opts_t, tls),
     AXON_CONFIG_TYPE_ALLOW_LIST},
    {"DEVICES", "a,b", "Devices to use.", offsetof(test_opts_t, devices),
     AXON_CONFIG_TYPE_STRING_LIST},
    {"PATH", "/x:/y", "Where to look.", offsetof(test_opts_t, path),
     AXON_CONFIG_TYPE_PATH_LIST},
    AXON_CONFIG_END
};

const char *const test_vars[] = {
    "AXON_TESTCFG_NAME", "AXON_TESTCFG_ENABLE", "AXON_TESTCFG_COUNT",
    "AXON_TESTCFG_FIFO_SIZE", "AXON_TESTCFG_TIMEOUT", "AXON_TESTCFG_MODE",
    "AXON_TESTCFG_TLS", "AXON_TESTCFG_DEVICES", "AXON_TESTCFG_PATH", NULL
};

void capture_hook(axon_log_level_t level, const char *message, void *arg)
{
    static_cast<std::vector<std::string>*>(arg)->push_back(message);
}

/* Captures log messages and keeps expected errors off the test output. */
class Config : public ::testing::Test {
protected:
    void SetUp() override
    {
        clear_env();
        saved_level_ = axon_log_level;
        axon_log_set_hook(capture_hook, &messages_);
        ASSERT_EQ(0, axon_log_set_file("/dev/null"));
    }

    void TearDown() override
    {
        axon_log_set_hook(NULL, NULL);
        axon_log_set_file("stderr");
        axon_log_set_level(saved_level_);
        clear_env();
    }

    static void clear_env()
    {
        for (const char *const *var = test_vars; *var != NULL; ++var) {
            unsetenv(*var);
        }
    }

    axon_status_t parse(test_opts_t *opts, const axon_config_kv_t *kv = NULL,
                        size_t kv_count = 0)
    {
        memset(opts, 0, sizeof(*opts));
        return axon_config_parse(test_table, "TESTCFG_", opts, kv, kv_count);
    }

    bool logged(const std::string &needle) const
    {
        for (const std::string &msg : messages_) {
            if (msg.find(needle) != std::string::npos) {
                return true;
            }
        }
        return false;
    }

    std::vector<std::string> messages_;
    axon_log_level_t         saved_level_;
};

/* Drive one parser object directly, the way axon_config_parse() does. */
template <typename T>
int read_value(const axon_config_parser_t &parser, const char *str, T *value)
{
    return parser.read(str, value, parser.arg);
}

template <typename T>
std::string write_value(const axon_config_parser_t &parser, const T &value)
{
    char buf[256];

    parser.write(buf, sizeof(buf), &value, parser.arg);
    return buf;
}

std::string read_file(const std::string &path)
{
    std::ifstream     in(path.c_str());
    std::stringstream ss;

    ss << in.rdbuf();
    return ss.str();
}

} /* namespace */

TEST_F(Config, DefaultsWhenUnset)
{
    test_opts_t opts;

    ASSERT_EQ(AXON_OK, parse(&opts));
    EXPECT_STREQ("hello", opts.name);
    EXPECT_EQ(1, opts.enabled);
    EXPECT_EQ(7u, opts.count);
    EXPECT_EQ(8192u, opts.fifo_size);
    EXPECT_DOUBLE_EQ(0.010, opts.timeout);
    EXPECT_EQ(0u, opts.mode);
    EXPECT_EQ(AXON_CONFIG_ALLOW_ALL, opts.tls.mode);
    EXPECT_EQ(0u, opts.tls.list.count);
    ASSERT_EQ(2u, opts.devices.count);
    EXPECT_STREQ("a", opts.devices.names[0]);
    EXPECT_STREQ("b", opts.devices.names[1]);
    ASSERT_EQ(2u, opts.path.count);
    EXPECT_STREQ("/y", opts.path.names[1]);
    axon_config_release(test_table, &opts);
}

TEST_F(Config, EnvironmentOverridesDefault)
{
    test_opts_t opts;

    setenv("AXON_TESTCFG_FIFO_SIZE", "4M", 1);
    setenv("AXON_TESTCFG_NAME", "from-env", 1);
    ASSERT_EQ(AXON_OK, parse(&opts));
    EXPECT_EQ(4u << 20, opts.fifo_size);
    EXPECT_STREQ("from-env", opts.name);
    EXPECT_EQ(7u, opts.count);  /* untouched entries keep their default */
    axon_config_release(test_table, &opts);
}

TEST_F(Config, KvOverrideBeatsEnvironment)
{
    const axon_config_kv_t kv[] = {
        {"TESTCFG_COUNT", "42"},
        {"SOMEONE_ELSES_VAR", "whatever"},  /* another table's: not an error */
    };
    test_opts_t opts;

    setenv("AXON_TESTCFG_COUNT", "13", 1);
    ASSERT_EQ(AXON_OK, parse(&opts, kv, 2));
    EXPECT_EQ(42u, opts.count);
    axon_config_release(test_table, &opts);
}

TEST_F(Config, KvNamesAreCaseSensitiveAndPrefixed)
{
    const axon_config_kv_t kv[] = {
        {"testcfg_count", "1"},
        {"COUNT", "2"},
        {"AXON_TESTCFG_COUNT", "3"},
    };
    test_opts_t opts;

    ASSERT_EQ(AXON_OK, parse(&opts, kv, 3));
    EXPECT_EQ(7u, opts.count);
    axon_config_release(test_table, &opts);
}

TEST_F(Config, BadEnvValueFailsAndNamesVariable)
{
    test_opts_t opts;

    setenv("AXON_TESTCFG_FIFO_SIZE", "abc", 1);
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, parse(&opts));
    EXPECT_TRUE(logged("AXON_TESTCFG_FIFO_SIZE")) << ::testing::PrintToString(messages_);
    EXPECT_TRUE(logged("'abc'"));
    EXPECT_TRUE(logged(axon_config_parser_size.syntax));
}

TEST_F(Config, BadKvValueFailsAfterListsParsed)
{
    /* PATH is last, so every list before it was allocated and must be freed. */
    const axon_config_kv_t kv[] = {{"TESTCFG_TLS", "^x,y"}, {"TESTCFG_PATH", ""}};
    const axon_config_kv_t bad[] = {{"TESTCFG_MODE", "spin"}};
    test_opts_t opts;

    ASSERT_EQ(AXON_OK, parse(&opts, kv, 2));
    EXPECT_EQ(0u, opts.path.count);
    axon_config_release(test_table, &opts);

    setenv("AXON_TESTCFG_DEVICES", "d0,d1,d2", 1);
    EXPECT_EQ(AXON_ERR_INVALID_PARAM, parse(&opts, bad, 1));
    EXPECT_TRUE(logged("AXON_TESTCFG_MODE"));
    EXPECT_TRUE(logged("spin"));
}

TEST_F(Config, ReleaseFreesAndClearsLists)
{
    test_opts_t opts;

    setenv("AXON_TESTCFG_TLS", "shm,self", 1);
    ASSERT_EQ(AXON_OK, parse(&opts));
    ASSERT_EQ(2u, opts.tls.list.count);
    axon_config_release(test_table, &opts);
    EXPECT_EQ(NULL, opts.name);
    EXPECT_EQ(NULL, opts.devices.names);
    EXPECT_EQ(0u, opts.devices.count);
    EXPECT_EQ(NULL, opts.path.names);
    EXPECT_EQ(NULL, opts.tls.list.names);
}

TEST_F(Config, BoolValues)
{
    const char *const yes[] = {"y", "YES", "On", "1", "true", "TRUE"};
    const char *const no[]  = {"n", "No", "OFF", "0", "false", "False"};
    const char *const bad[] = {"", "2", "yess", "enable", " yes", "t"};
    int value;

    for (const char *str : yes) {
        value = 0;
        EXPECT_EQ(0, read_value(axon_config_parser_bool, str, &value)) << str;
        EXPECT_EQ(1, value) << str;
    }
    for (const char *str : no) {
        value = 1;
        EXPECT_EQ(0, read_value(axon_config_parser_bool, str, &value)) << str;
        EXPECT_EQ(0, value) << str;
    }
    for (const char *str : bad) {
        EXPECT_EQ(-1, read_value(axon_config_parser_bool, str, &value)) << str;
    }
    value = 1;
    EXPECT_EQ("y", write_value(axon_config_parser_bool, value));
}

TEST_F(Config, UintValues)
{
    const char *const bad[] = {"", "-1", "+1", " 1", "1x", "abc", "4294967296",
                               "99999999999999999999999", "0x10", "1.5"};
    unsigned value;

    ASSERT_EQ(0, read_value(axon_config_parser_uint, "0", &value));
    EXPECT_EQ(0u, value);
    ASSERT_EQ(0, read_value(axon_config_parser_uint, "4294967295", &value));
    EXPECT_EQ(UINT_MAX, value);
    ASSERT_EQ(0, read_value(axon_config_parser_uint, "0123", &value));
    EXPECT_EQ(123u, value);
    for (const char *str : bad) {
        EXPECT_EQ(-1, read_value(axon_config_parser_uint, str, &value)) << str;
    }
    value = 99;
    EXPECT_EQ("99", write_value(axon_config_parser_uint, value));
}

TEST_F(Config, SizeValues)
{
    const struct {
        const char *str;
        size_t      value;
    } good[] = {
        {"0", 0}, {"100", 100}, {"100b", 100}, {"100B", 100},
        {"8k", 8192}, {"8K", 8192}, {"8kb", 8192}, {"8KB", 8192},
        {"3m", 3ul << 20}, {"3Mb", 3ul << 20}, {"2g", 2ul << 30}, {"2GB", 2ul << 30},
        {"inf", AXON_CONFIG_SIZE_INF}, {"INF", AXON_CONFIG_SIZE_INF},
    };
    const char *const bad[] = {"", "k", "-1", " 1", "1 k", "1kk", "1t", "1.5k",
                               "abc", "infinity", "18446744073709551615",
                               "99999999999999999999999", "17179869184g"};
    size_t value;

    for (const auto &t : good) {
        value = 1;
        EXPECT_EQ(0, read_value(axon_config_parser_size, t.str, &value)) << t.str;
        EXPECT_EQ(t.value, value) << t.str;
    }
    for (const char *str : bad) {
        EXPECT_EQ(-1, read_value(axon_config_parser_size, str, &value)) << str;
    }
}

TEST_F(Config, SizeWrite)
{
    EXPECT_EQ("8K", write_value(axon_config_parser_size, (size_t)8192));
    EXPECT_EQ("1M", write_value(axon_config_parser_size, (size_t)1 << 20));
    EXPECT_EQ("3G", write_value(axon_config_parser_size, (size_t)3 << 30));
    EXPECT_EQ("1000", write_value(axon_config_parser_size, (size_t)1000));
    EXPECT_EQ("0", write_value(axon_config_parser_size, (size_t)0));
    EXPECT_EQ("inf", write_value(axon_config_parser_size, AXON_CONFIG_SIZE_INF));
}

TEST_F(Config, TimeValues)
{
    const struct {
        const char *str;
        double      value;
    } good[] = {
        {"2", 2.0}, {"1.5s", 1.5}, {"10ms", 0.010}, {"10MS", 0.010},
        {"250us", 250e-6}, {"100ns", 100e-9}, {".5", 0.5}, {"0", 0.0},
    };
    const char *const bad[] = {"", "-1", "-1ms", "1min", "abc", "nan", "inf",
                               " 1s", "1 s", "0x10", "1e999", "ms"};
    double value;

    for (const auto &t : good) {
        value = -1;
        EXPECT_EQ(0, read_value(axon_config_parser_time, t.str, &value)) << t.str;
        EXPECT_DOUBLE_EQ(t.value, value) << t.str;
    }
    for (const char *str : bad) {
        EXPECT_EQ(-1, read_value(axon_config_parser_time, str, &value)) << str;
    }
    EXPECT_EQ("10ms", write_value(axon_config_parser_time, 0.010));
    EXPECT_EQ("2s", write_value(axon_config_parser_time, 2.0));
    EXPECT_EQ("250us", write_value(axon_config_parser_time, 250e-6));
}

TEST_F(Config, StringValue)
{
    char *value = NULL;

    ASSERT_EQ(0, read_value(axon_config_parser_string, "some text", &value));
    EXPECT_STREQ("some text", value);
    EXPECT_EQ("some text", write_value(axon_config_parser_string, value));
    axon_config_parser_string.release(&value, axon_config_parser_string.arg);
    EXPECT_EQ(NULL, value);
}

TEST_F(Config, EnumIsCaseInsensitive)
{
    const axon_config_parser_t parser = AXON_CONFIG_TYPE_ENUM(test_modes, "poll|busy|sleep");
    unsigned value;

    ASSERT_EQ(0, read_value(parser, "BUSY", &value));
    EXPECT_EQ(1u, value);
    ASSERT_EQ(0, read_value(parser, "Sleep", &value));
    EXPECT_EQ(2u, value);
    ASSERT_EQ(0, read_value(parser, "busy", &value));
    EXPECT_EQ(1u, value);
    EXPECT_EQ(-1, read_value(parser, "spin", &value));
    EXPECT_EQ(-1, read_value(parser, "", &value));
    EXPECT_EQ(-1, read_value(parser, "pol", &value));
    value = 1;
    EXPECT_EQ("Busy", write_value(parser, value));
}

TEST_F(Config, StringListTrimsAndRejectsEmptyItems)
{
    const char *const bad[] = {"a,,b", "a,", ",a", "a, ,b", ","};
    axon_config_names_t names;

    ASSERT_EQ(0, read_value(axon_config_parser_string_list, " shm , self,tcp ", &names));
    ASSERT_EQ(3u, names.count);
    EXPECT_STREQ("shm", names.names[0]);
    EXPECT_STREQ("self", names.names[1]);
    EXPECT_STREQ("tcp", names.names[2]);
    EXPECT_TRUE(axon_config_names_contain(&names, "self"));
    EXPECT_FALSE(axon_config_names_contain(&names, "sel"));
    EXPECT_FALSE(axon_config_names_contain(&names, "SELF"));
    EXPECT_EQ("shm,self,tcp", write_value(axon_config_parser_string_list, names));
    axon_config_parser_string_list.release(&names, axon_config_parser_string_list.arg);
    EXPECT_EQ(0u, names.count);

    for (const char *str : bad) {
        EXPECT_EQ(-1, read_value(axon_config_parser_string_list, str, &names)) << str;
    }
    ASSERT_EQ(0, read_value(axon_config_parser_string_list, "", &names));
    EXPECT_EQ(0u, names.count);
}

TEST_F(Config, PathListSkipsEmptyItems)
{
    axon_config_names_t names;

    ASSERT_EQ(0, read_value(axon_config_parser_path_list, "::/a b::/c:", &names));
    ASSERT_EQ(2u, names.count);
    EXPECT_STREQ("/a b", names.names[0]);
    EXPECT_STREQ("/c", names.names[1]);
    EXPECT_EQ("/a b:/c", write_value(axon_config_parser_path_list, names));
    axon_config_parser_path_list.release(&names, axon_config_parser_path_list.arg);

    ASSERT_EQ(0, read_value(axon_config_parser_path_list, "", &names));
    EXPECT_EQ(0u, names.count);
    EXPECT_EQ(NULL, names.names);
}

TEST_F(Config, AllowListForms)
{
    const axon_config_parser_t &parser = axon_config_parser_allow_list;
    axon_config_allow_list_t allow;

    ASSERT_EQ(0, read_value(parser, "all", &allow));
    EXPECT_EQ(AXON_CONFIG_ALLOW_ALL, allow.mode);
    EXPECT_EQ(0u, allow.list.count);
    EXPECT_TRUE(axon_config_allows(&allow, "anything"));
    EXPECT_EQ("all", write_value(parser, allow));
    parser.release(&allow, parser.arg);

    ASSERT_EQ(0, read_value(parser, "shm,self", &allow));
    EXPECT_EQ(AXON_CONFIG_ALLOW_LISTED, allow.mode);
    EXPECT_TRUE(axon_config_allows(&allow, "shm"));
    EXPECT_TRUE(axon_config_allows(&allow, "self"));
    EXPECT_FALSE(axon_config_allows(&allow, "tcp"));
    EXPECT_EQ("shm,self", write_value(parser, allow));
    parser.release(&allow, parser.arg);

    ASSERT_EQ(0, read_value(parser, "^shm", &allow));
    EXPECT_EQ(AXON_CONFIG_DENY_LISTED, allow.mode);
    EXPECT_FALSE(axon_config_allows(&allow, "shm"));
    EXPECT_TRUE(axon_config_allows(&allow, "self"));
    EXPECT_EQ("^shm", write_value(parser, allow));
    parser.release(&allow, parser.arg);

    EXPECT_EQ(-1, read_value(parser, "", &allow));
    EXPECT_EQ(-1, read_value(parser, "^", &allow));
    EXPECT_EQ(-1, read_value(parser, "shm,,self", &allow));
}

TEST_F(Config, TableHas)
{
    EXPECT_TRUE(axon_config_table_has(test_table, "TESTCFG_", "TESTCFG_FIFO_SIZE"));
    EXPECT_TRUE(axon_config_table_has(test_table, "TESTCFG_", "TESTCFG_PATH"));
    EXPECT_FALSE(axon_config_table_has(test_table, "TESTCFG_", "FIFO_SIZE"));
    EXPECT_FALSE(axon_config_table_has(test_table, "TESTCFG_", "TESTCFG_FIFO"));
    EXPECT_FALSE(axon_config_table_has(test_table, "TESTCFG_", "TESTCFG_fifo_size"));
    EXPECT_FALSE(axon_config_table_has(test_table, "OTHER_", "TESTCFG_FIFO_SIZE"));
    EXPECT_TRUE(axon_config_table_has(test_table, "", "FIFO_SIZE"));
}

TEST_F(Config, PrintShowsDocSyntaxDefaultAndValue)
{
    const axon_config_kv_t kv[] = {{"TESTCFG_FIFO_SIZE", "1m"}};
    test_opts_t opts;
    char       *text = NULL;
    size_t      size = 0;
    FILE       *stream;

    ASSERT_EQ(AXON_OK, parse(&opts, kv, 1));
    stream = open_memstream(&text, &size);
    ASSERT_TRUE(stream != NULL);
    axon_config_print(test_table, "TESTCFG_", &opts, stream);
    fclose(stream);
    axon_config_release(test_table, &opts);

    std::string out(text);
    free(text);
    EXPECT_NE(std::string::npos,
              out.find("#\n# Bytes in the fifo.\n#\n"
                       "# syntax:  size: <number>[b|k|m|g] or inf\n"
                       "# default: 8k\n#\nAXON_TESTCFG_FIFO_SIZE=1M\n\n")) << out;
    EXPECT_NE(std::string::npos, out.find("AXON_TESTCFG_TLS=all\n"));
    EXPECT_NE(std::string::npos, out.find("AXON_TESTCFG_MODE=poll\n"));
    EXPECT_NE(std::string::npos, out.find("AXON_TESTCFG_PATH=/x:/y\n"));
    EXPECT_NE(std::string::npos, out.find("AXON_TESTCFG_TIMEOUT=10ms\n"));
}

TEST_F(Config, LogLevelNames)
{
    EXPECT_STREQ("error", axon_log_level_name(AXON_LOG_ERROR));
    EXPECT_STREQ("warn", axon_log_level_name(AXON_LOG_WARN));
    EXPECT_STREQ("info", axon_log_level_name(AXON_LOG_INFO));
    EXPECT_STREQ("debug", axon_log_level_name(AXON_LOG_DEBUG));
    EXPECT_STREQ("trace", axon_log_level_name(AXON_LOG_TRACE));
}

TEST_F(Config, LogFileFiltersByLevelAndHookSeesAll)
{
    char        dir_template[] = "/tmp/axon_logtest.XXXXXX";
    char       *dir            = mkdtemp(dir_template);
    std::string spec, path, text, expect;
    char        host[64]       = {0};

    ASSERT_TRUE(dir != NULL);
    spec = std::string(dir) + "/log.%p.txt";
    path = std::string(dir) + "/log." + std::to_string(getpid()) + ".txt";

    ASSERT_EQ(0, axon_log_set_file(spec.c_str()));
    axon_log_set_level(AXON_LOG_WARN);
    axon_info("quiet %d", 1);
    axon_warn("loud %d", 2);
    axon_error("louder %s", "three");
    ASSERT_EQ(0, axon_log_set_file("stderr"));  /* closes and flushes the file */

    /* The hook sees every message, printed or not, without the prefix. */
    ASSERT_EQ(3u, messages_.size());
    EXPECT_EQ("quiet 1", messages_[0]);
    EXPECT_EQ("loud 2", messages_[1]);
    EXPECT_EQ("louder three", messages_[2]);

    text = read_file(path);
    gethostname(host, sizeof(host) - 1);
    expect = "[" + std::string(host) + ":" + std::to_string(getpid()) +
             "] axon WARN test_config.cc:";
    EXPECT_EQ(0u, text.find(expect)) << text;
    EXPECT_EQ(std::string::npos, text.find("quiet"));
    EXPECT_NE(std::string::npos, text.find(" loud 2\n"));
    EXPECT_NE(std::string::npos, text.find("axon ERROR test_config.cc:"));
    EXPECT_NE(std::string::npos, text.find(" louder three\n"));

    /* Append mode: reopening keeps what is there. */
    ASSERT_EQ(0, axon_log_set_file(spec.c_str()));
    axon_log_set_level(AXON_LOG_TRACE);
    axon_trace("again");
    ASSERT_EQ(0, axon_log_set_file("stderr"));
    text = read_file(path);
    EXPECT_NE(std::string::npos, text.find(" loud 2\n"));
    EXPECT_NE(std::string::npos, text.find(" again\n"));

    unlink(path.c_str());
    rmdir(dir);
}

TEST_F(Config, LogSetFileFailureKeepsOldOutput)
{
    char        path_template[] = "/tmp/axon_logtest.XXXXXX";
    int         fd              = mkstemp(path_template);
    std::string text;

    ASSERT_GE(fd, 0);
    close(fd);
    ASSERT_EQ(0, axon_log_set_file(path_template));
    EXPECT_EQ(-1, axon_log_set_file("/nonexistent-axon-dir/x/log.txt"));
    EXPECT_TRUE(logged("/nonexistent-axon-dir/x/log.txt"));
    axon_error("still here");
    ASSERT_EQ(0, axon_log_set_file("stderr"));

    /* The failure was reported to, and later lines still go to, the old file. */
    text = read_file(path_template);
    EXPECT_NE(std::string::npos, text.find("nonexistent-axon-dir")) << text;
    EXPECT_NE(std::string::npos, text.find(" still here\n")) << text;
    unlink(path_template);
}

TEST_F(Config, LogHookOffMeansFilteredMessagesAreSkipped)
{
    axon_log_set_hook(NULL, NULL);
    EXPECT_EQ(0, axon_log_hook_active);
    axon_log_set_level(AXON_LOG_ERROR);
    axon_debug("not seen");
    axon_log_set_hook(capture_hook, &messages_);
    EXPECT_NE(0, axon_log_hook_active);
    EXPECT_TRUE(messages_.empty());
    axon_debug("seen");
    ASSERT_EQ(1u, messages_.size());
    EXPECT_EQ("seen", messages_[0]);
}
