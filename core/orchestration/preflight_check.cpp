#include "orchestration/preflight_check.h"

#include "config/cluster_file.h"
#include "orchestration/cluster_launcher.h"

#include "base/qt_text.h"
#include "base/version.h"
#include "orchestration/logging.h"
#include "orchestration/ssh_command.h"
#include "orchestration/task_runner.h"

#include <QRegularExpression>
#include <QTimer>

#include <algorithm>
#include <memory>

#include <optional>

namespace parasync {

namespace {

constexpr int kOverallTimeoutMs = 60000; // each step is bounded itself; this is the backstop

QString addressList(const std::vector<HostPort> &addresses)
{
    QStringList list;
    for (const HostPort &address : addresses)
        list << qs(address.toString());
    return list.join(QLatin1Char(','));
}

struct PlanHost
{
    QString name;                       // as the cluster's addresses spell it
    const RemoteHost *remote = nullptr; // nullptr: this machine
    std::vector<TaskId> tasks;
};

// The hosts the check goes through, in task order: the tasks of one name
// share one, a remote one kept apart from a local one of the same name.
std::vector<PlanHost> hostsOf(const ClusterPlan &plan)
{
    std::vector<PlanHost> hosts;
    for (const TaskId &task : plan.tasks()) {
        const QString name = qs(plan.cluster.address(task).host);
        const RemoteHost *remote = plan.remoteHost(task);
        auto host = std::find_if(hosts.begin(), hosts.end(), [&](const PlanHost &known) {
            return known.name == name && (known.remote != nullptr) == (remote != nullptr);
        });
        if (host == hosts.end())
            host = hosts.insert(hosts.end(), PlanHost{name, remote, {}});
        host->tasks.push_back(task);
    }
    return hosts;
}

} // namespace

QString checkKindName(PreflightItem::Kind kind)
{
    switch (kind) {
    case PreflightItem::Kind::Ssh: return QStringLiteral("SSH");
    case PreflightItem::Kind::Node: return QStringLiteral("parasync-node");
    case PreflightItem::Kind::Port: return QStringLiteral("port free");
    case PreflightItem::Kind::Reach: return QStringLiteral("reaches ps");
    case PreflightItem::Kind::Program: return QStringLiteral("worker command");
    }
    return {};
}

struct PreflightCheck::HostRun
{
    QString name;                     // as the cluster's addresses spell it
    std::optional<RemoteHost> remote; // empty: this machine
    std::vector<TaskId> tasks;
    bool usable = false; // ssh works and parasync-node is there
    QString nodeProgram;
    QStringList workerPrograms; // the programs of its workers' own commands, each once
};

PreflightCheck::PreflightCheck(QObject *parent) : QObject(parent) {}

PreflightCheck::~PreflightCheck()
{
    ++m_generation;
    for (QProcess *process : findChildren<QProcess *>()) {
        process->disconnect(this);
        process->kill();
        process->waitForFinished(1000);
    }
}

PreflightItem &PreflightCheck::item(PreflightItem::Kind kind, const QString &host, const QString &subject)
{
    for (auto &entry : m_items)
        if (entry.kind == kind && entry.host == host && entry.subject == subject)
            return entry;
    PreflightItem entry;
    entry.kind = kind;
    entry.host = host;
    entry.subject = subject;
    m_items.push_back(entry);
    return m_items.back();
}

void PreflightCheck::fail(PreflightItem &entry, const QString &detail, const QString &fix)
{
    entry.outcome = CheckOutcome::Failed;
    entry.detail = detail;
    entry.fix = fix;
}

void PreflightCheck::pass(PreflightItem &entry, const QString &detail)
{
    entry.outcome = CheckOutcome::Passed;
    entry.detail = detail;
    entry.fix.clear();
}

void PreflightCheck::start(const ClusterPlan &plan)
{
    for (QProcess *process : findChildren<QProcess *>()) {
        process->disconnect(this);
        process->kill();
    }
    const int generation = ++m_generation;
    m_plan = plan;
    m_items.clear();
    m_hosts.clear();
    m_runs.clear();
    m_running = true;

    for (const PlanHost &host : hostsOf(plan)) {
        auto run = std::make_unique<HostRun>();
        run->name = host.name;
        if (host.remote)
            run->remote = *host.remote;
        run->nodeProgram = host.remote ? qs(host.remote->nodeProgram()) : m_nodeBinary;
        run->tasks = host.tasks;
        for (const TaskId &task : host.tasks)
            if (task.job == JobName::Worker && !plan.commandOf(task.index).empty()
                && !run->workerPrograms.contains(qs(plan.commandOf(task.index).front())))
                run->workerPrograms << qs(plan.commandOf(task.index).front());
        m_runs.push_back(std::move(run));
        m_hosts << host.name;
    }
    // Every check shows as pending at once: the grid's shape is known.
    for (const auto &run : m_runs) {
        item(PreflightItem::Kind::Ssh, run->name,
             run->remote ? QStringLiteral("ssh ") + describeSshTarget(*run->remote) : QStringLiteral("this machine"));
        item(PreflightItem::Kind::Node, run->name, QStringLiteral("parasync-node"));
        for (const QString &program : run->workerPrograms)
            item(PreflightItem::Kind::Program, run->name, program);
        for (const TaskId &task : run->tasks) {
            PreflightItem &port
                = item(PreflightItem::Kind::Port, run->name,
                       QStringLiteral("%1 port %2").arg(qs(task.toString())).arg(plan.cluster.address(task).port));
            port.task = task;
        }
        for (const TaskId &task : run->tasks) {
            if (task.job != JobName::Worker)
                continue;
            for (int ps = 0; ps < plan.cluster.numPs(); ++ps) {
                const TaskId psTask{JobName::Ps, ps};
                PreflightItem &reach = item(
                    PreflightItem::Kind::Reach, run->name,
                    QStringLiteral("%1 at %2").arg(qs(psTask.toString()), qs(plan.cluster.ps[size_t(ps)].toString())));
                reach.task = psTask;
            }
        }
    }
    Q_EMIT itemsChanged();
    QTimer::singleShot(kOverallTimeoutMs, this, [this, generation] {
        if (generation != m_generation || !m_running)
            return;
        for (auto &entry : m_items)
            if (entry.outcome == CheckOutcome::Pending)
                fail(entry, tr("no answer within %1 s").arg(kOverallTimeoutMs / 1000),
                     tr("check the host's network and load, then run the check again"));
        finish();
    });
    startHostChecks();
}

QString PreflightCheck::describeHosts(const ClusterPlan &plan)
{
    bool local = false;
    QStringList remote;
    for (const PlanHost &host : hostsOf(plan)) {
        if (host.remote)
            remote << host.name;
        else
            local = true;
    }
    const QString here = tr("this machine");
    if (remote.isEmpty())
        return here;
    const QString there
        = remote.size() == 1
              ? tr("1 remote host (%1)").arg(remote.front())
              : tr("%1 remote hosts (%2)").arg(QString::number(remote.size()), remote.join(QStringLiteral(", ")));
    return local ? tr("%1 and %2").arg(here, there) : there;
}

QProcess *PreflightCheck::runOnHost(int hostIndex, const QStringList &nodeArguments, const QString &script)
{
    const HostRun &run = *m_runs[size_t(hostIndex)];
    // "$n" is the node program, quoted for the shell that runs `script`.
    QString command = QStringLiteral("n=") + shellQuote(run.nodeProgram) + QLatin1Char('\n');
    QStringList quoted;
    for (const QString &argument : nodeArguments)
        quoted << shellQuote(argument);
    command += QStringLiteral("a=%1\n").arg(shellQuote(quoted.join(QLatin1Char(' ')))) + script;
    auto *process = new QProcess(this);
    process->setProcessChannelMode(QProcess::MergedChannels);
    if (run.remote) {
        const QStringList arguments = sshArguments(*run.remote, QStringLiteral("sh -c ") + shellQuote(command));
        qCDebug(lcRemote).noquote() << "pre-flight:" << sshProgram() << arguments.join(QLatin1Char(' '));
        process->start(sshProgram(), arguments);
    } else
        process->start(QStringLiteral("/bin/sh"), {QStringLiteral("-c"), command});
    return process;
}

void PreflightCheck::startHostChecks()
{
    const int generation = m_generation;
    m_pending = int(m_runs.size());
    for (int index = 0; index < int(m_runs.size()); ++index) {
        const HostRun &run = *m_runs[size_t(index)];
        std::vector<HostPort> ports;
        for (const TaskId &task : run.tasks)
            ports.push_back(m_plan.cluster.address(task));
        // Each worker program is looked up as the launcher's runner does
        // (command -v, from the same working directory) and answered by index.
        QString programs;
        for (int i = 0; i < int(run.workerPrograms.size()); ++i)
            programs += QStringLiteral("if command -v %1 >/dev/null 2>&1; then echo @program-found %2; "
                                       "else echo @program-missing %2; fi\n")
                            .arg(shellQuote(run.workerPrograms[i]), QString::number(i));
        const QString script = QStringLiteral("echo @ssh-ok\n") + programs
                               + QStringLiteral("if command -v \"$n\" >/dev/null 2>&1; then\n"
                                                "  echo \"@version $(\"$n\" --version 2>&1 | head -n 1)\"\n"
                                                "  eval \"\\\"\\$n\\\" $a\" 2>&1\n"
                                                "else echo \"@node-missing $(hostname 2>/dev/null)\"; fi\n");
        QProcess *process = runOnHost(index, {QStringLiteral("--check_ports=") + addressList(ports)}, script);
        connect(process, &QProcess::finished, this,
                [this, process, index, generation](int code, QProcess::ExitStatus status) {
                    process->deleteLater();
                    if (generation == m_generation)
                        onHostChecked(index, QString::fromUtf8(process->readAll()), code,
                                      status == QProcess::CrashExit);
                });
        connect(process, &QProcess::errorOccurred, this,
                [this, process, index, generation](QProcess::ProcessError error) {
                    if (error != QProcess::FailedToStart || generation != m_generation)
                        return;
                    process->deleteLater();
                    onHostChecked(index, QStringLiteral("cannot run ssh: ") + process->errorString(), 255, false);
                });
    }
}

void PreflightCheck::onHostChecked(int hostIndex, const QString &output, int exitCode, bool crashed)
{
    if (!m_running) // the overall time limit ended this run
        return;
    HostRun &run = *m_runs[size_t(hostIndex)];
    const QStringList lines = output.split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    PreflightItem &ssh
        = item(PreflightItem::Kind::Ssh, run.name,
               run.remote ? QStringLiteral("ssh ") + describeSshTarget(*run.remote) : QStringLiteral("this machine"));
    PreflightItem &node = item(PreflightItem::Kind::Node, run.name, QStringLiteral("parasync-node"));
    const auto skipRest = [&](const QString &why) {
        for (auto &entry : m_items)
            if (entry.host == run.name && entry.outcome == CheckOutcome::Pending
                && entry.kind != PreflightItem::Kind::Ssh && &entry != &node) {
                entry.outcome = CheckOutcome::Skipped;
                entry.detail = why;
            }
    };

    if (!lines.contains(QStringLiteral("@ssh-ok"))) {
        QString sshError;
        for (const QString &line : lines)
            sshError = line.trimmed(); // ssh says why last
        if (run.remote)
            fail(ssh, sshError.isEmpty() ? tr("ssh failed (exit code %1)").arg(exitCode) : sshError,
                 sshFailureAdvice(sshError, *run.remote));
        else
            fail(ssh, tr("cannot run /bin/sh here: %1").arg(sshError), tr("check this machine's /bin/sh"));
        node.outcome = CheckOutcome::Skipped;
        node.detail = tr("needs SSH");
        skipRest(tr("needs SSH"));
    } else {
        pass(ssh, run.remote ? tr("logged in without a password") : tr("tasks run here as child processes"));
        checkWorkerPrograms(run, lines);
        const QString expected = qs(nodeVersionLine());
        QString version;
        bool missing = crashed;
        for (const QString &line : lines) {
            if (line.startsWith(QLatin1String("@version ")))
                version = line.mid(9).trimmed();
            if (line.startsWith(QLatin1String("@node-missing")))
                missing = true;
        }
        const QString where = run.remote ? describeSshTarget(*run.remote) : tr("this machine");
        if (missing) {
            fail(node, tr("%1 not found on %2").arg(run.nodeProgram, where),
                 run.remote
                     ? tr("install parasync-node (%1) on %2, or give its path as \"node\" in the cluster file's "
                          "\"hosts\" entry for %3")
                           .arg(expected, where, run.name)
                     : tr("build it (scripts/setup.sh), put it next to the app or on PATH, or set PARASYNC_NODE"));
            skipRest(tr("needs parasync-node"));
        } else if (version != expected) {
            fail(node, tr("%1 says \"%2\"; this app is %3").arg(run.nodeProgram, version, expected),
                 tr("install the same build of parasync-node on %1 as this app's (%2): nodes of different "
                    "versions may not understand each other")
                     .arg(where, expected));
            skipRest(tr("needs a matching parasync-node"));
        } else {
            pass(node, tr("%1: %2").arg(run.nodeProgram, version));
            run.usable = true;
            static const QRegularExpression portLine(QStringLiteral("^port (\\S+) (free|taken: (.*))$"));
            for (const QString &line : lines) {
                const auto match = portLine.match(line.trimmed());
                if (!match.hasMatch())
                    continue;
                for (const TaskId &task : run.tasks) {
                    const HostPort &address = m_plan.cluster.address(task);
                    if (qs(address.toString()) != match.captured(1))
                        continue;
                    PreflightItem &port = item(PreflightItem::Kind::Port, run.name,
                                               QStringLiteral("%1 port %2").arg(qs(task.toString())).arg(address.port));
                    if (match.captured(2) == QLatin1String("free")) {
                        pass(port, tr("%1 is free").arg(match.captured(1)));
                        continue;
                    }
                    QString why = match.captured(3);
                    static const QRegularExpression freeSuffix(QStringLiteral("; free: (\\d+)$"));
                    if (const auto suggestion = freeSuffix.match(why); suggestion.hasMatch()) {
                        port.suggestedPort = uint16_t(suggestion.captured(1).toUInt());
                        why = why.left(suggestion.capturedStart());
                    }
                    fail(port, tr("%1 is taken: %2").arg(match.captured(1), why),
                         why.startsWith(QLatin1String("address in use"))
                             ? (port.suggestedPort != 0
                                    ? tr("stop the process holding it, or use the free port %1 (\"Use free ports\")")
                                          .arg(port.suggestedPort)
                                    : tr("stop the process holding it, or pick another port"))
                             : tr("give %1 an address of %2 itself").arg(qs(task.toString()), where));
                }
            }
            for (auto &entry : m_items)
                if (entry.host == run.name && entry.kind == PreflightItem::Kind::Port
                    && entry.outcome == CheckOutcome::Pending) {
                    entry.outcome = CheckOutcome::Skipped;
                    entry.detail = tr("parasync-node there could not check it");
                }
        }
    }
    Q_EMIT itemsChanged();
    if (--m_pending == 0)
        startReachChecks();
}

void PreflightCheck::checkWorkerPrograms(const HostRun &run, const QStringList &lines)
{
    const QString where = run.remote ? describeSshTarget(*run.remote) : tr("this machine");
    for (int i = 0; i < int(run.workerPrograms.size()); ++i) {
        const QString &program = run.workerPrograms[i];
        PreflightItem &entry = item(PreflightItem::Kind::Program, run.name, program);
        if (lines.contains(QStringLiteral("@program-found %1").arg(i)))
            pass(entry, tr("%1 is there").arg(program));
        else if (lines.contains(QStringLiteral("@program-missing %1").arg(i)))
            fail(entry, tr("%1 not found on %2").arg(program, where), workerProgramMissingAdvice(program));
        else
            fail(entry, tr("the host's shell did not say"), tr("check that %1 has a POSIX shell").arg(where));
    }
}

void PreflightCheck::startReachChecks()
{
    const int generation = m_generation;
    // 1. Hold every free ps port on its host, so that a worker's probe meets
    //    a real listener there: what remains is the network between them.
    int holdersPending = 0;
    auto probesStarted = std::make_shared<bool>(false);
    const auto startProbes = [this, generation, probesStarted] {
        if (*probesStarted || generation != m_generation || !m_running)
            return;
        *probesStarted = true;
        m_pending = 0;
        for (int index = 0; index < int(m_runs.size()); ++index) {
            const HostRun &run = *m_runs[size_t(index)];
            const bool hasWorker = std::any_of(run.tasks.begin(), run.tasks.end(),
                                               [](const TaskId &t) { return t.job == JobName::Worker; });
            if (!hasWorker)
                continue;
            if (!run.usable) {
                for (auto &entry : m_items)
                    if (entry.host == run.name && entry.kind == PreflightItem::Kind::Reach
                        && entry.outcome == CheckOutcome::Pending) {
                        entry.outcome = CheckOutcome::Skipped;
                        entry.detail = tr("needs SSH and parasync-node on this host");
                    }
                continue;
            }
            ++m_pending;
            QProcess *process = runOnHost(index, {QStringLiteral("--probe=") + addressList(m_plan.cluster.ps)},
                                          QStringLiteral("eval \"\\\"\\$n\\\" $a\" 2>&1\n"));
            connect(process, &QProcess::finished, this,
                    [this, process, index, generation](int code, QProcess::ExitStatus status) {
                        process->deleteLater();
                        if (generation == m_generation)
                            onReachChecked(index, QString::fromUtf8(process->readAll()), code,
                                           status == QProcess::CrashExit);
                    });
        }
        Q_EMIT itemsChanged();
        if (m_pending == 0)
            finish();
    };

    for (int index = 0; index < int(m_runs.size()); ++index) {
        const HostRun &run = *m_runs[size_t(index)];
        if (!run.usable)
            continue;
        std::vector<HostPort> free;
        for (const TaskId &task : run.tasks) {
            if (task.job != JobName::Ps)
                continue;
            const HostPort &address = m_plan.cluster.address(task);
            for (const auto &entry : m_items)
                if (entry.kind == PreflightItem::Kind::Port && entry.task == task
                    && entry.outcome == CheckOutcome::Passed)
                    free.push_back(address);
        }
        if (free.empty())
            continue;
        ++holdersPending;
        QProcess *holder = runOnHost(index, {QStringLiteral("--hold_ports=") + addressList(free)},
                                     QStringLiteral("eval \"exec \\\"\\$n\\\" $a\"\n"));
        auto seen = std::make_shared<int>(0);
        auto counted = std::make_shared<bool>(false);
        const int expected = int(free.size());
        connect(holder, &QProcess::readyReadStandardOutput, this, [this, holder, seen, expected, counted, startProbes] {
            while (holder->canReadLine()) {
                const QString line = QString::fromUtf8(holder->readLine());
                if (line.startsWith(QLatin1String("holding ")) || line.startsWith(QLatin1String("hold ")))
                    ++*seen;
            }
            if (*seen >= expected && !*counted) {
                *counted = true;
                if (--m_holdersWaiting == 0)
                    startProbes();
            }
        });
        connect(holder, &QProcess::finished, this, [this, holder, counted, startProbes](int, QProcess::ExitStatus) {
            // A holder that ended early (ssh dropped): probe anyway.
            if (!*counted) {
                *counted = true;
                if (--m_holdersWaiting == 0)
                    startProbes();
            }
            holder->deleteLater();
        });
    }
    m_holdersWaiting = holdersPending;
    if (holdersPending == 0)
        startProbes();
}

void PreflightCheck::onReachChecked(int hostIndex, const QString &output, int exitCode, bool crashed)
{
    if (!m_running)
        return;
    const HostRun &run = *m_runs[size_t(hostIndex)];
    static const QRegularExpression reachLine(QStringLiteral("^reach (\\S+) (ok|failed: (.*))$"));
    for (const QString &line : output.split(QLatin1Char('\n'), Qt::SkipEmptyParts)) {
        const auto match = reachLine.match(line.trimmed());
        if (!match.hasMatch())
            continue;
        for (int ps = 0; ps < m_plan.cluster.numPs(); ++ps) {
            const HostPort &address = m_plan.cluster.ps[size_t(ps)];
            if (qs(address.toString()) != match.captured(1))
                continue;
            PreflightItem &reach = item(PreflightItem::Kind::Reach, run.name,
                                        QStringLiteral("ps:%1 at %2").arg(ps).arg(match.captured(1)));
            if (match.captured(2) == QLatin1String("ok")) {
                pass(reach, tr("connects to %1").arg(match.captured(1)));
                continue;
            }
            const bool loopbackElsewhere = address.isLoopback() && qs(address.host) != run.name;
            fail(reach, tr("cannot connect to %1: %2").arg(match.captured(1), match.captured(3)),
                 loopbackElsewhere
                     ? tr("ps:%1's address %2 is a loopback address: on %3 it means %3 itself. Give ps:%1 an address "
                          "the workers can reach")
                           .arg(ps)
                           .arg(qs(address.toString()), run.name)
                     : tr("let %1 reach TCP port %2 on %3: open it in %3's firewall (e.g. `ufw allow %2/tcp`, or "
                          "`iptables -I INPUT -p tcp --dport %2 -j ACCEPT`) and check the route between the hosts")
                           .arg(run.name)
                           .arg(address.port)
                           .arg(qs(address.host)));
        }
    }
    for (auto &entry : m_items)
        if (entry.host == run.name && entry.kind == PreflightItem::Kind::Reach
            && entry.outcome == CheckOutcome::Pending)
            fail(entry,
                 crashed || exitCode != 0
                     ? tr("the probe failed (exit code %1): %2").arg(exitCode).arg(output.trimmed().right(300))
                     : tr("no answer from the probe"),
                 tr("run the check again"));
    Q_EMIT itemsChanged();
    if (--m_pending == 0)
        finish();
}

void PreflightCheck::finish()
{
    if (!m_running)
        return;
    m_running = false;
    // Release the held ps ports: closing stdin ends each holder.
    for (QProcess *holder : findChildren<QProcess *>())
        holder->closeWriteChannel();
    Q_EMIT itemsChanged();
    Q_EMIT finished(passed());
}

bool PreflightCheck::passed() const
{
    return std::none_of(m_items.begin(), m_items.end(),
                        [](const PreflightItem &entry) { return entry.outcome == CheckOutcome::Failed; });
}

bool PreflightCheck::hasPortSuggestions() const
{
    return std::any_of(m_items.begin(), m_items.end(), [](const PreflightItem &entry) {
        return entry.kind == PreflightItem::Kind::Port && entry.outcome == CheckOutcome::Failed
               && entry.suggestedPort != 0;
    });
}

ClusterPlan PreflightCheck::planWithFreePorts() const
{
    std::vector<PortConflict> conflicts;
    for (const auto &entry : m_items) {
        if (entry.kind != PreflightItem::Kind::Port || entry.outcome != CheckOutcome::Failed
            || entry.suggestedPort == 0)
            continue;
        PortConflict conflict;
        conflict.task = entry.task;
        conflict.suggestedPort = entry.suggestedPort;
        conflicts.push_back(conflict);
    }
    return ClusterLauncher::withSuggestedPorts(m_plan, conflicts);
}

QString PreflightCheck::report() const
{
    QString text;
    for (const auto &entry : m_items) {
        const char *mark = entry.outcome == CheckOutcome::Passed    ? "ok  "
                           : entry.outcome == CheckOutcome::Failed  ? "FAIL"
                           : entry.outcome == CheckOutcome::Skipped ? "skip"
                                                                    : "... ";
        text += QStringLiteral("%1 %2 %3: %4 -- %5")
                    .arg(QLatin1String(mark), entry.host, checkKindName(entry.kind), entry.subject, entry.detail);
        if (!entry.fix.isEmpty())
            text += QStringLiteral("\n       fix: ") + entry.fix;
        text += QLatin1Char('\n');
    }
    return text;
}

} // namespace parasync
