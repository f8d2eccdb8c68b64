#pragma once

// The table of settings that differ between compared runs (orchestration's
// compareRunSettings), as an item model: a row per setting, its name first,
// then a column per run in the runs' colours. The settings all runs share
// follow in grey when asked for.

#include "orchestration/run_settings.h"

#include <QAbstractTableModel>

namespace parasync::ui {

class RunSettingsModel : public QAbstractTableModel
{
    Q_OBJECT

public:
    explicit RunSettingsModel(QObject *parent = nullptr);

    void setComparison(SettingsComparison comparison);
    const SettingsComparison &comparison() const { return m_comparison; }
    // Whether the shared settings are rows too (after the differing ones).
    void setShowShared(bool show);
    bool showsShared() const { return m_showShared; }

    int rowCount(const QModelIndex &parent = {}) const override;
    int columnCount(const QModelIndex &parent = {}) const override;
    QVariant data(const QModelIndex &index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

    // The table in words for the window's caption: "3 settings differ; 27 shared".
    QString summary() const;

private:
    const SettingRow &rowAt(int row) const;
    bool isShared(int row) const { return row >= int(m_comparison.differing.size()); }

    SettingsComparison m_comparison;
    bool m_showShared = false;
};

} // namespace parasync::ui
