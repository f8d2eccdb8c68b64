#pragma once

// A sparse model's embedding tables as its ps tasks hold them, put together
// for the app's Tables tab: per ps task and table what its TaskStatus answer
// says (rows, memory, rows pulled and pushed, bytes moved, hot ids, sampled
// row norms) and what two answers in a row tell (bytes per step, pulls a
// second), the load imbalance across the ps tasks, the hottest ids of all
// of them, and one histogram of the row norms. Plain values, no threads: the
// watcher's table poller feeds an EmbeddingTablesTracker and hands out its
// snapshots; tests feed it by hand.

#include <QMetaType>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace parasync {

namespace proto {
class TaskStatusResponse;
}

struct HotIdCount
{
    uint64_t id = 0;
    int64_t count = 0; // pulls of it, a Space-Saving estimate ...
    int64_t error = 0; // ... too high by at most this
};

// One table on one ps task, as its answer gives it (TableStatus).
struct TableFigures
{
    std::string name;
    int64_t rows = 0;
    int64_t payloadBytes = 0;
    int64_t memoryBytes = 0;
    int64_t rowsPulled = 0; // since the start
    int64_t rowsPushed = 0;
    int64_t wireBytes = 0;
    int64_t updates = 0;
    std::vector<HotIdCount> hotIds; // most pulled first
    std::vector<float> rowNorms;    // a sample of up to 256 rows
};

// The tables of a ps task's TaskStatus answer.
std::vector<TableFigures> tableFiguresOf(const proto::TaskStatusResponse &status);

// How unevenly the ps tasks share something: the largest share over the
// mean one (1: even).
struct Imbalance
{
    bool known = false; // false with nothing to share yet
    double ratio = 1;   // max / mean
    int psIndex = -1;   // the ps task with the most
};

// The imbalance of `perPs` (one value per ps task); unknown when they sum
// to nothing.
Imbalance imbalanceOf(const std::vector<double> &perPs);
// In words: "ps:1 holds 1.8× the mean rows" (`holds` and `what` as given),
// "even: within 3 %" while the largest is within 5 % of the mean, "—"
// while unknown.
std::string describeImbalance(const Imbalance &imbalance, const std::string &holds, const std::string &what);

// `bins` bins of equal width from the smallest sample to the largest.
struct NormHistogram
{
    double lower = 0;
    double upper = 0;
    std::vector<int> counts;
    int samples = 0;

    double binWidth() const { return counts.empty() ? 0 : (upper - lower) / double(counts.size()); }
};
NormHistogram histogramOf(const std::vector<float> &samples, int bins);

// One table on one ps task, as the view shows it.
struct PsTableFigures
{
    int64_t rows = 0;
    int64_t memoryBytes = 0;
    int64_t payloadBytes = 0;
    int64_t rowsPulled = 0;
    int64_t rowsPushed = 0;
    int64_t wireBytes = 0;
    int64_t updates = 0;
    std::optional<double> memoryPerRow; // none without rows
    // Wire bytes (ids and values, both ways) per update applied, between
    // the last two answers that saw updates: none before two answers.
    std::optional<double> bytesPerStep;
    // Rows pulled a second between the last two answers: none before two.
    std::optional<double> pullsPerSecond;
    double rowShare = 0;  // of the table's rows, 0-1
    double pullShare = 0; // of the table's pulls since the start, 0-1
    // Every hot id it reports is counted more by error than by pulls: its
    // summary holds fewer ids than its steps pull alike often, and churns.
    bool hotIdsUncertain = false;
};

// One id among the hottest of a table, all ps tasks together.
struct HotIdShare
{
    uint64_t id = 0;
    int64_t count = 0;
    int64_t error = 0;
    // Of all the table's pulls on every ps task: at most `share`, at least
    // `surelyShare` (count less error). They differ for an id that entered
    // the ps task's summary late, in place of another.
    double share = 0;
    double surelyShare = 0;
    int psIndex = 0; // the ps task that holds its row
    // Its sure pulls (count less error) per update of its ps task (1: in
    // every step's batch): what the list is ordered by. Each ps task answers
    // at its own instant, so raw counts of two are a few steps apart; these
    // are not. A summary that holds fewer ids than a step pulls (many ids
    // alike in frequency) churns: its ids' counts are mostly error, and they
    // go to the end.
    double perUpdate = 0;
};

struct TableSummary
{
    std::string name;
    int64_t rows = 0; // every ps task's last figures together
    int64_t memoryBytes = 0;
    int64_t rowsPulled = 0;
    // By ps index; none for a ps task that never answered with this table.
    std::vector<std::optional<PsTableFigures>> byPs;
    Imbalance rowImbalance;  // over the ps tasks' rows; unknown while one never answered
    Imbalance pullImbalance; // over the answering ps tasks' pulls a second
    std::vector<HotIdShare> hottest;
    NormHistogram norms; // every ps task's sampled rows together
};

// Whether a ps task answers; its figures are its last answer's either way.
struct PsTaskTables
{
    std::string address; // the process asked last (or the one that answered)
    bool answering = false;
    bool everAnswered = false;
    std::string problem;            // why it does not answer, for a person
    double secondsSinceAnswer = -1; // -1: never answered
};

struct EmbeddingTablesSnapshot
{
    std::vector<PsTaskTables> ps;
    std::vector<TableSummary> tables; // in the ps tasks' (the signature's) order
    int polls = 0;                    // polls of the ps tasks behind these figures

    bool empty() const { return tables.empty(); }
};

// Accumulates the ps tasks' answers, poll after poll. Not thread-safe: one
// owner (the poller's thread, a test).
class EmbeddingTablesTracker
{
public:
    static constexpr int kHottestIds = 20;
    static constexpr int kNormBins = 20;

    // The number of ps tasks; answers of others are ignored.
    void setPsCount(int count);
    int psCount() const { return int(m_ps.size()); }
    // ps task `psIndex` answered at `seconds` (any steady clock) from `address`.
    void recordAnswer(int psIndex, const std::string &address, double seconds, std::vector<TableFigures> tables);
    // ps task `psIndex` did not answer at `seconds`: its last figures stay,
    // marked as not answering.
    void recordSilence(int psIndex, const std::string &address, double seconds, const std::string &problem);
    // A poll of every ps task is done (counted in the snapshot).
    void finishPoll() { ++m_polls; }
    EmbeddingTablesSnapshot snapshot() const;
    void clear();

private:
    struct Answer
    {
        double seconds = 0;
        std::vector<TableFigures> tables;
    };
    struct Ps
    {
        std::string address;
        bool answering = false;
        std::string problem;
        double lastSeconds = 0; // of the last poll, answered or not
        std::optional<Answer> last;
        std::optional<Answer> previous;
        // Per table (by name): the last bytes per step two answers showed,
        // kept while no update comes (a finished or held run).
        std::vector<std::pair<std::string, double>> bytesPerStep;
    };
    PsTableFigures figuresOf(const Ps &ps, const TableFigures &table) const;

    std::vector<Ps> m_ps;
    int m_polls = 0;
};

} // namespace parasync

Q_DECLARE_METATYPE(parasync::EmbeddingTablesSnapshot)
