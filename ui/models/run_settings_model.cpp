#include "ui/models/run_settings_model.h"

#include "ui/models/chart_style.h"

#include <QBrush>
#include <QColor>
#include <QFont>

namespace parasync::ui {

RunSettingsModel::RunSettingsModel(QObject *parent) : QAbstractTableModel(parent) {}

void RunSettingsModel::setComparison(SettingsComparison comparison)
{
    beginResetModel();
    m_comparison = std::move(comparison);
    endResetModel();
}

void RunSettingsModel::setShowShared(bool show)
{
    if (show == m_showShared)
        return;
    beginResetModel();
    m_showShared = show;
    endResetModel();
}

int RunSettingsModel::rowCount(const QModelIndex &parent) const
{
    if (parent.isValid())
        return 0;
    return int(m_comparison.differing.size() + (m_showShared ? m_comparison.shared.size() : 0));
}

int RunSettingsModel::columnCount(const QModelIndex &parent) const
{
    return parent.isValid() ? 0 : 1 + int(m_comparison.runs.size());
}

const SettingRow &RunSettingsModel::rowAt(int row) const
{
    return isShared(row) ? m_comparison.shared[size_t(row) - m_comparison.differing.size()]
                         : m_comparison.differing[size_t(row)];
}

QVariant RunSettingsModel::data(const QModelIndex &index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= columnCount())
        return {};
    const SettingRow &row = rowAt(index.row());
    const int run = index.column() - 1;
    if (role == Qt::DisplayRole) {
        if (run < 0)
            return row.name;
        const auto &value = row.values[size_t(run)];
        if (!value)
            return tr("\u2014"); // the run does not say
        return value->isEmpty() ? tr("(unset)") : *value;
    }
    if (role == Qt::ForegroundRole && isShared(index.row()))
        return QBrush(QColor(0x70, 0x70, 0x70));
    if (role == Qt::ToolTipRole) {
        if (run < 0)
            return isShared(index.row()) ? tr("The same in every run") : tr("Differs between the runs");
        if (!row.values[size_t(run)])
            return m_comparison.withoutSettings.contains(m_comparison.runs[run])
                       ? tr("%1 has no cluster.json").arg(m_comparison.runs[run])
                       : tr("%1 does not record this setting").arg(m_comparison.runs[run]);
    }
    return {};
}

QVariant RunSettingsModel::headerData(int section, Qt::Orientation orientation, int role) const
{
    if (orientation != Qt::Horizontal || section < 0 || section >= columnCount())
        return QAbstractTableModel::headerData(section, orientation, role);
    if (role == Qt::DisplayRole)
        return section == 0 ? tr("setting") : m_comparison.runs[section - 1];
    // Each run's name in the colour of its line.
    if (role == Qt::ForegroundRole && section > 0)
        return QBrush(runColor(section - 1));
    if (role == Qt::FontRole && section > 0) {
        QFont bold;
        bold.setBold(true);
        return bold;
    }
    return {};
}

QString RunSettingsModel::summary() const
{
    if (m_comparison.runs.size() < 2)
        return tr("Add another run to see which settings differ.");
    QString text
        = m_comparison.differing.empty()
              ? tr("The runs share all %1 settings.").arg(m_comparison.shared.size())
              : (m_comparison.differing.size() == 1 ? tr("1 setting differs")
                                                    : tr("%1 settings differ").arg(m_comparison.differing.size()))
                    + tr("; %1 shared").arg(m_comparison.shared.size());
    if (!m_comparison.withoutSettings.isEmpty())
        text += tr(" (no cluster.json in %1)").arg(m_comparison.withoutSettings.join(QStringLiteral(", ")));
    return text;
}

} // namespace parasync::ui
