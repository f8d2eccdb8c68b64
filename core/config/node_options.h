#pragma once

#include "config/task_options.h"

#include <map>
#include <string>
#include <vector>

namespace parasync {

class FlagValues;

// Parses a parasync-node command line (argv[0] included). The cluster comes
// from, in order of precedence: --ps_hosts/--worker_hosts, --cluster_file,
// the TF_CONFIG value given (pass the environment's TF_CONFIG, or empty).
// --job_name/--task_index override TF_CONFIG's task. Accepts the seeds'
// --issync=0|1 (1 = sync, 0 = async unless --mode says otherwise).
// Throws InputError with a message naming the flag and what to do.
NodeOptions parseNodeOptions(const std::vector<std::string> &args, const std::string &tfConfig);
// The same inside a Slurm job step: with --slurm, or when `slurm` holds
// SLURM_PROCID and neither --ps_hosts, --cluster_file, --job_name nor
// TF_CONFIG names the cluster, the cluster and the task come from `slurm`
// (slurm_environment.h), laid out by --slurm_num_ps and --slurm_port_base;
// training flags still come from the command line and a --cluster_file's
// "training".
NodeOptions parseNodeOptions(const std::vector<std::string> &args, const std::string &tfConfig,
                             const std::map<std::string, std::string> &slurm);

// The flags that say how a task talks to the others (--tls_*,
// --max_message_bytes, --heartbeat_ms, --data_link), and their reading: a
// control command (control_command.h) reads them as a task does.
const std::vector<std::string> &connectionFlagNames();
ConnectionOptions connectionFromFlags(const FlagValues &flags);

// Text for --help: every flag with its default and meaning.
std::string nodeHelpText();

} // namespace parasync
