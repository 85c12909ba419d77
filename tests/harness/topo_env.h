/*
 * Topology test helpers (framework/topo/'s tests, shm's placement): an
 * hwloc XML topology of two packages, each with its NUMA node, one CPU and
 * a PCI network device (0000:03:00.0 by CPU 0, 0000:83:00.0 by CPU 1),
 * written to a file for AXON_TOPOLOGY=xml:PATH; and a guard that binds the
 * calling thread to one CPU and puts its old binding back.
 */
#ifndef AXON_TEST_TOPO_ENV_H
#define AXON_TEST_TOPO_ENV_H

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

namespace {

const char kTwoPackagesXml[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n"
    "<topology version=\"2.0\">\n"
    " <object type=\"Machine\" os_index=\"0\" cpuset=\"0x3\" complete_cpuset=\"0x3\""
    " allowed_cpuset=\"0x3\" nodeset=\"0x3\" complete_nodeset=\"0x3\" allowed_nodeset=\"0x3\""
    " gp_index=\"1\">\n"
    "  <object type=\"Package\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\""
    " nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"2\">\n"
    "   <object type=\"NUMANode\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\""
    " nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"3\" local_memory=\"1073741824\"/>\n"
    "   <object type=\"PU\" os_index=\"0\" cpuset=\"0x1\" complete_cpuset=\"0x1\""
    " nodeset=\"0x1\" complete_nodeset=\"0x1\" gp_index=\"4\"/>\n"
    "   <object type=\"Bridge\" gp_index=\"5\" bridge_type=\"0-1\" depth=\"0\""
    " bridge_pci=\"0000:[03-03]\">\n"
    "    <object type=\"PCIDev\" gp_index=\"6\" pci_busid=\"0000:03:00.0\""
    " pci_type=\"0207 [15b3:1017] [15b3:0020] 00\" pci_link_speed=\"0.000000\"/>\n"
    "   </object>\n"
    "  </object>\n"
    "  <object type=\"Package\" os_index=\"1\" cpuset=\"0x2\" complete_cpuset=\"0x2\""
    " nodeset=\"0x2\" complete_nodeset=\"0x2\" gp_index=\"7\">\n"
    "   <object type=\"NUMANode\" os_index=\"1\" cpuset=\"0x2\" complete_cpuset=\"0x2\""
    " nodeset=\"0x2\" complete_nodeset=\"0x2\" gp_index=\"8\" local_memory=\"1073741824\"/>\n"
    "   <object type=\"PU\" os_index=\"1\" cpuset=\"0x2\" complete_cpuset=\"0x2\""
    " nodeset=\"0x2\" complete_nodeset=\"0x2\" gp_index=\"9\"/>\n"
    "   <object type=\"Bridge\" gp_index=\"10\" bridge_type=\"0-1\" depth=\"0\""
    " bridge_pci=\"0000:[83-83]\">\n"
    "    <object type=\"PCIDev\" gp_index=\"11\" pci_busid=\"0000:83:00.0\""
    " pci_type=\"0207 [15b3:1017] [15b3:0020] 00\" pci_link_speed=\"0.000000\"/>\n"
    "   </object>\n"
    "  </object>\n"
    " </object>\n"
    "</topology>\n";

const char kNearCpu0[] = "pci:0000:03:00.0";
const char kNearCpu1[] = "pci:0000:83:00.0";

/* The XML above in a file of its own, removed with the object. */
class TwoPackagesXml {
public:
    TwoPackagesXml()
    {
        char path[] = "/tmp/axon_topo_XXXXXX";
        int  fd     = mkstemp(path);

        if (fd >= 0) {
            FILE *f = fdopen(fd, "w");
            if ((f != nullptr) && (fputs(kTwoPackagesXml, f) >= 0) && (fclose(f) == 0)) {
                path_ = path;
            } else {
                unlink(path);
            }
        }
    }
    ~TwoPackagesXml()
    {
        if (!path_.empty()) {
            unlink(path_.c_str());
        }
    }
    bool ok() const { return !path_.empty(); }
    /* What AXON_TOPOLOGY takes. */
    std::string source() const { return "xml:" + path_; }

private:
    std::string path_;
};

/* Binds the calling thread to cpu for its scope (ok() false if the host refuses). */
class CpuBinding {
public:
    explicit CpuBinding(int cpu)
    {
        cpu_set_t one;

        saved_ok_ = (pthread_getaffinity_np(pthread_self(), sizeof(saved_), &saved_) == 0);
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        bound_ = saved_ok_ && (pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0);
    }
    ~CpuBinding()
    {
        if (saved_ok_) {
            pthread_setaffinity_np(pthread_self(), sizeof(saved_), &saved_);
        }
    }
    bool ok() const { return bound_; }

private:
    cpu_set_t saved_;
    bool      saved_ok_ = false;
    bool      bound_    = false;
};

/* Can this thread run on CPUs 0 and 1 (the two packages of the XML)? */
inline bool two_cpus_usable()
{
    cpu_set_t set;

    return (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) == 0) &&
           CPU_ISSET(0, &set) && CPU_ISSET(1, &set);
}

} // namespace

#endif
