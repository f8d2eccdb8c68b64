#include "orchestration/embedding_tables.h"

#include "proto/parasync.pb.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace parasync {

std::vector<TableFigures> tableFiguresOf(const proto::TaskStatusResponse &status)
{
    std::vector<TableFigures> tables;
    tables.reserve(size_t(status.tables_size()));
    for (const proto::TableStatus &table : status.tables()) {
        TableFigures figures;
        figures.name = table.name();
        figures.rows = table.rows();
        figures.payloadBytes = table.payload_bytes();
        figures.memoryBytes = table.memory_bytes();
        figures.rowsPulled = table.rows_pulled();
        figures.rowsPushed = table.rows_pushed();
        figures.wireBytes = table.wire_bytes();
        figures.updates = table.updates();
        for (const proto::HotId &hot : table.hot_ids())
            figures.hotIds.push_back(HotIdCount{hot.id(), hot.count(), hot.error()});
        figures.rowNorms.assign(table.row_norms().begin(), table.row_norms().end());
        tables.push_back(std::move(figures));
    }
    return tables;
}

Imbalance imbalanceOf(const std::vector<double> &perPs)
{
    Imbalance imbalance;
    double total = 0;
    for (const double value : perPs)
        total += value;
    if (perPs.empty() || !(total > 0))
        return imbalance;
    const auto largest = std::max_element(perPs.begin(), perPs.end());
    imbalance.known = true;
    imbalance.psIndex = int(largest - perPs.begin());
    imbalance.ratio = *largest / (total / double(perPs.size()));
    return imbalance;
}

std::string describeImbalance(const Imbalance &imbalance, const std::string &holds, const std::string &what)
{
    if (!imbalance.known)
        return "\u2014";
    char text[96];
    const double excess = imbalance.ratio - 1;
    if (excess < 0.05) {
        // "within 0 %" would claim more than two samples can.
        std::snprintf(text, sizeof text, "even: within %d %%", std::max(1, int(std::ceil(excess * 100 - 1e-9))));
        return text;
    }
    std::snprintf(text, sizeof text, excess < 0.1 ? "%.2f" : "%.1f", imbalance.ratio);
    return "ps:" + std::to_string(imbalance.psIndex) + " " + holds + " " + text + "\u00d7 the mean " + what;
}

NormHistogram histogramOf(const std::vector<float> &samples, int bins)
{
    NormHistogram histogram;
    std::vector<double> finite;
    finite.reserve(samples.size());
    for (const float sample : samples)
        if (std::isfinite(sample))
            finite.push_back(double(sample));
    if (finite.empty() || bins < 1)
        return histogram;
    const auto [low, high] = std::minmax_element(finite.begin(), finite.end());
    histogram.lower = *low;
    histogram.upper = *high;
    // Rows all alike (a table just made with zeros): one bin around them.
    if (!(histogram.upper > histogram.lower)) {
        histogram.upper = histogram.lower + std::max(1e-6, std::abs(histogram.lower) * 0.01);
        bins = 1;
    }
    histogram.counts.assign(size_t(bins), 0);
    const double width = (histogram.upper - histogram.lower) / bins;
    for (const double value : finite) {
        const int bin = std::clamp(int((value - histogram.lower) / width), 0, bins - 1);
        ++histogram.counts[size_t(bin)];
    }
    histogram.samples = int(finite.size());
    return histogram;
}

void EmbeddingTablesTracker::setPsCount(int count)
{
    m_ps.resize(size_t(std::max(0, count)));
}

void EmbeddingTablesTracker::recordAnswer(int psIndex, const std::string &address, double seconds,
                                          std::vector<TableFigures> tables)
{
    if (psIndex < 0 || psIndex >= psCount())
        return;
    Ps &ps = m_ps[size_t(psIndex)];
    ps.address = address;
    ps.answering = true;
    ps.problem.clear();
    ps.lastSeconds = seconds;
    Answer answer{seconds, std::move(tables)};
    // A ps task started again counts from 0: its old figures are no
    // "previous" for the new ones.
    bool restarted = false;
    if (ps.last)
        for (const TableFigures &now : answer.tables)
            for (const TableFigures &before : ps.last->tables)
                if (now.name == before.name && (now.updates < before.updates || now.wireBytes < before.wireBytes))
                    restarted = true;
    ps.previous = restarted ? std::nullopt : std::move(ps.last);
    if (restarted)
        ps.bytesPerStep.clear();
    ps.last = std::move(answer);
    if (!ps.previous)
        return;
    for (const TableFigures &now : ps.last->tables) {
        for (const TableFigures &before : ps.previous->tables) {
            if (now.name != before.name || now.updates <= before.updates)
                continue;
            const double perStep = double(now.wireBytes - before.wireBytes) / double(now.updates - before.updates);
            auto known = std::find_if(ps.bytesPerStep.begin(), ps.bytesPerStep.end(),
                                      [&](const auto &entry) { return entry.first == now.name; });
            if (known == ps.bytesPerStep.end())
                ps.bytesPerStep.emplace_back(now.name, perStep);
            else
                known->second = perStep;
        }
    }
}

void EmbeddingTablesTracker::recordSilence(int psIndex, const std::string &address, double seconds,
                                           const std::string &problem)
{
    if (psIndex < 0 || psIndex >= psCount())
        return;
    Ps &ps = m_ps[size_t(psIndex)];
    ps.address = address;
    ps.answering = false;
    ps.problem = problem;
    ps.lastSeconds = seconds;
}

void EmbeddingTablesTracker::clear()
{
    for (Ps &ps : m_ps)
        ps = Ps();
    m_polls = 0;
}

PsTableFigures EmbeddingTablesTracker::figuresOf(const Ps &ps, const TableFigures &table) const
{
    PsTableFigures figures;
    figures.rows = table.rows;
    figures.memoryBytes = table.memoryBytes;
    figures.payloadBytes = table.payloadBytes;
    figures.rowsPulled = table.rowsPulled;
    figures.rowsPushed = table.rowsPushed;
    figures.wireBytes = table.wireBytes;
    figures.updates = table.updates;
    if (table.rows > 0)
        figures.memoryPerRow = double(table.memoryBytes) / double(table.rows);
    figures.hotIdsUncertain = !table.hotIds.empty()
                              && std::all_of(table.hotIds.begin(), table.hotIds.end(),
                                             [](const HotIdCount &hot) { return hot.error * 2 > hot.count; });
    for (const auto &[name, perStep] : ps.bytesPerStep)
        if (name == table.name)
            figures.bytesPerStep = perStep;
    if (ps.previous && ps.last->seconds > ps.previous->seconds)
        for (const TableFigures &before : ps.previous->tables)
            if (before.name == table.name)
                figures.pullsPerSecond
                    = double(table.rowsPulled - before.rowsPulled) / (ps.last->seconds - ps.previous->seconds);
    return figures;
}

namespace {

TableSummary &summaryNamed(std::vector<TableSummary> &tables, const std::string &name, size_t psCount)
{
    for (TableSummary &table : tables)
        if (table.name == name)
            return table;
    TableSummary &table = tables.emplace_back();
    table.name = name;
    table.byPs.resize(psCount);
    return table;
}

} // namespace

EmbeddingTablesSnapshot EmbeddingTablesTracker::snapshot() const
{
    EmbeddingTablesSnapshot snapshot;
    snapshot.polls = m_polls;
    double now = 0;
    for (const Ps &ps : m_ps)
        now = std::max(now, ps.lastSeconds);
    for (const Ps &ps : m_ps) {
        PsTaskTables state;
        state.address = ps.address;
        state.answering = ps.answering;
        state.everAnswered = ps.last.has_value();
        state.problem = ps.problem;
        if (ps.last)
            state.secondsSinceAnswer = std::max(0.0, now - ps.last->seconds);
        snapshot.ps.push_back(std::move(state));
    }

    std::vector<float> norms;
    for (size_t index = 0; index < m_ps.size(); ++index) {
        const Ps &ps = m_ps[index];
        if (!ps.last)
            continue;
        for (const TableFigures &table : ps.last->tables) {
            TableSummary &summary = summaryNamed(snapshot.tables, table.name, m_ps.size());
            summary.byPs[index] = figuresOf(ps, table);
            summary.rows += table.rows;
            summary.memoryBytes += table.memoryBytes;
            summary.rowsPulled += table.rowsPulled;
            for (const HotIdCount &hot : table.hotIds)
                summary.hottest.push_back(
                    HotIdShare{hot.id, hot.count, hot.error, 0, 0, int(index),
                               double(hot.count - hot.error) / double(std::max<int64_t>(1, table.updates))});
        }
    }

    for (TableSummary &summary : snapshot.tables) {
        std::vector<double> rows;
        std::vector<double> pulls;
        std::vector<int> pullingPs; // whose rate each of `pulls` is
        norms.clear();
        for (size_t index = 0; index < summary.byPs.size(); ++index) {
            auto &figures = summary.byPs[index];
            rows.push_back(figures ? double(figures->rows) : 0.0);
            // Over the ps tasks that answered twice in a row: a silent
            // one's old rate says nothing of now.
            if (figures && m_ps[index].answering && figures->pullsPerSecond) {
                pulls.push_back(std::max(0.0, *figures->pullsPerSecond));
                pullingPs.push_back(int(index));
            }
            if (figures) {
                figures->rowShare = summary.rows > 0 ? double(figures->rows) / double(summary.rows) : 0;
                figures->pullShare
                    = summary.rowsPulled > 0 ? double(figures->rowsPulled) / double(summary.rowsPulled) : 0;
                for (const TableFigures &table : m_ps[index].last->tables)
                    if (table.name == summary.name)
                        norms.insert(norms.end(), table.rowNorms.begin(), table.rowNorms.end());
            }
        }
        // A ps task never heard from holds rows nobody knows: no balance.
        if (std::all_of(summary.byPs.begin(), summary.byPs.end(),
                        [](const auto &figures) { return figures.has_value(); }))
            summary.rowImbalance = imbalanceOf(rows);
        // One ps task's rate alone is no balance: the others are silent.
        if (pulls.size() >= std::min<size_t>(2, m_ps.size()))
            summary.pullImbalance = imbalanceOf(pulls);
        if (summary.pullImbalance.known)
            summary.pullImbalance.psIndex = pullingPs[size_t(summary.pullImbalance.psIndex)];
        // Ids in every batch tie (pulled once a step each): by id then, not
        // by ps task, so the list does not show one ps task's alone.
        std::sort(summary.hottest.begin(), summary.hottest.end(), [](const HotIdShare &a, const HotIdShare &b) {
            return a.perUpdate != b.perUpdate ? a.perUpdate > b.perUpdate : a.id < b.id;
        });
        if (summary.hottest.size() > size_t(kHottestIds))
            summary.hottest.resize(size_t(kHottestIds));
        for (HotIdShare &hot : summary.hottest) {
            const double pulled = double(std::max<int64_t>(1, summary.rowsPulled));
            hot.share = double(hot.count) / pulled;
            hot.surelyShare = double(hot.count - hot.error) / pulled;
        }
        summary.norms = histogramOf(norms, kNormBins);
    }
    return snapshot;
}

} // namespace parasync
