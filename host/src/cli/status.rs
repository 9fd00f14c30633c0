//! `wasmop status [--guests-configmap <ns>/<name>] [--kubeconfig <path>]
//! [--leader-elect-lease-name <name>] [-o text|json|yaml]` (interface
//! contract): one row per guest from the status ConfigMap beside the guest
//! list, with its version and rollout; in text, then, one row per unit of
//! work (a guest, or a shard of one) with the replica that holds its Lease,
//! and one row per guest whose last module was refused (a bad signature, a
//! digest mismatch, a failed fetch or load), from the hosts' Events on the
//! list: the running version, if any, keeps running.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context as _;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::Api;

use super::{Report, config};
use crate::leader::units::lease_name;
use crate::rollout::Record;
use crate::rollout::record::{records, status_name};
use crate::source::list::{GuestList, LIST_KEY};

/// `wasmop status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The guest list, `<namespace>/<name>`; its status ConfigMap is
    /// `<name>-status` beside it.
    #[arg(long, value_name = "NAMESPACE/NAME", default_value = crate::source::watch::DEFAULT_LIST)]
    pub guests_configmap: String,
    /// Kubeconfig file; default: $KUBECONFIG, ~/.kube/config or in-cluster.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The hosts' `--leader-elect-lease-name`: the units' Leases are
    /// `<name>-<guest>` and `<name>-<guest>-<shard>`.
    #[arg(long, value_name = "NAME", default_value = "wasmop")]
    pub leader_elect_lease_name: String,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: Report,
}

/// Runs `wasmop status`.
pub async fn status(args: StatusArgs) -> anyhow::Result<()> {
    let (namespace, list) = crate::source::watch::parse_list_ref(&args.guests_configmap)
        .with_context(|| {
            format!(
                "--guests-configmap takes <namespace>/<name>, got {:?}",
                args.guests_configmap
            )
        })?;
    let client = kube::Client::try_from(config(args.kubeconfig.as_ref()).await?)?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let name = status_name(&list);
    let recorded = api
        .get_opt(&name)
        .await
        .with_context(|| format!("reading {namespace}/{name}"))?
        .map(|cm| records(&cm))
        .with_context(|| {
            format!("{namespace}/{name} does not exist: no host follows the guest list {namespace}/{list} yet")
        })?;
    // Listed guests no host runs yet have no record; each has its shards.
    let units: Vec<(String, u16)> = api
        .get_opt(&list)
        .await?
        .and_then(|cm| cm.data.and_then(|d| d.get(LIST_KEY).cloned()))
        .and_then(|text| GuestList::parse(&text).ok())
        .map(|l| {
            l.guests
                .into_iter()
                .map(|g| {
                    let shards = g.controller().map_or(1, |c| c.shards);
                    (g.name, shards)
                })
                .collect()
        })
        .unwrap_or_default();
    let listed: Vec<String> = units.iter().map(|(name, _)| name.clone()).collect();
    match args.output {
        Report::Json => println!("{}", serde_json::to_string_pretty(&recorded)?),
        Report::Yaml => print!("{}", serde_saphyr::to_string(&recorded)?),
        Report::Text => {
            print!("{}", table(&recorded, &listed));
            // Leader election may be off: then no unit has a Lease.
            let leases: Api<Lease> = Api::namespaced(client.clone(), &namespace);
            if let Ok(leases) = leases.list(&Default::default()).await {
                let holders = holders(&args.leader_elect_lease_name, &units, &leases.items);
                if !holders.is_empty() {
                    print!("\n{}", columns(holders));
                }
            }
            let events: Api<Event> = Api::namespaced(client, &namespace);
            match events.list(&Default::default()).await {
                Ok(events) => {
                    let refused = refused(&list, &listed, &events.items);
                    if !refused.is_empty() {
                        print!("\n{}", columns(refused));
                    }
                }
                Err(e) => eprintln!("the hosts' Events on {namespace}/{list} cannot be read: {e}"),
            }
        }
    }
    Ok(())
}

/// The rows of the guests whose last module was refused, `GUEST REFUSED
/// MESSAGE` (the header first): for each listed guest, the last `LoadGuest`
/// Event a host recorded about it on the guest list `list`, when that
/// Event is a Warning; none when no guest's is.
fn refused(list: &str, listed: &[String], events: &[Event]) -> Vec<[String; 3]> {
    let mut last: BTreeMap<&str, &Event> = BTreeMap::new();
    let when = |e: &Event| {
        e.series
            .as_ref()
            .map(|s| s.last_observed_time.0)
            .or(e.event_time.as_ref().map(|t| t.0))
    };
    for event in events {
        let about_list = event.regarding.as_ref().is_some_and(|r| {
            r.kind.as_deref() == Some("ConfigMap") && r.name.as_deref() == Some(list)
        });
        let ours = event.reporting_controller.as_deref() == Some(wasmop_contract::names::REPORTER)
            && event.action.as_deref() == Some("LoadGuest");
        let Some(guest) = event.reporting_instance.as_deref() else {
            continue;
        };
        if !(about_list && ours && listed.iter().any(|g| g == guest)) {
            continue;
        }
        if last.get(guest).is_none_or(|seen| when(seen) <= when(event)) {
            last.insert(guest, event);
        }
    }
    let mut rows: Vec<[String; 3]> = last
        .into_iter()
        .filter(|(_, e)| e.type_.as_deref() == Some("Warning"))
        .map(|(guest, e)| {
            [
                guest.to_owned(),
                e.reason.clone().unwrap_or_default(),
                e.note.clone().unwrap_or_default(),
            ]
        })
        .collect();
    if rows.is_empty() {
        return rows;
    }
    rows.insert(0, ["GUEST".into(), "REFUSED".into(), "MESSAGE".into()]);
    rows
}

/// The rows of the units' holders, `GUEST SHARD HOLDER` (the header
/// first): one per unit of a listed guest (with its shard count) whose
/// Lease ([`lease_name`] of `base`) is among `leases`; none when no unit
/// has a Lease (leader election off).
fn holders(base: &str, guests: &[(String, u16)], leases: &[Lease]) -> Vec<[String; 3]> {
    let holder_of: BTreeMap<&str, String> = leases
        .iter()
        .filter_map(|lease| {
            let holder = lease
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.clone())
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "-".to_owned());
            Some((lease.metadata.name.as_deref()?, holder))
        })
        .collect();
    let mut rows = Vec::new();
    for (guest, shards) in guests {
        for shard in 0..*shards {
            let name = lease_name(base, guest, (*shards > 1).then_some(shard));
            if let Some(holder) = holder_of.get(name.as_str()) {
                rows.push([guest.clone(), shard.to_string(), holder.clone()]);
            }
        }
    }
    if rows.is_empty() {
        return rows;
    }
    let mut out = vec![["GUEST".to_owned(), "SHARD".to_owned(), "HOLDER".to_owned()]];
    out.extend(rows);
    out
}

/// The table `wasmop status` prints.
pub fn table(recorded: &BTreeMap<String, Record>, listed: &[String]) -> String {
    let short = |d: &str| d[..d.len().min(12)].to_owned();
    let mut rows = vec![[
        "GUEST".to_owned(),
        "PHASE".to_owned(),
        "STABLE".to_owned(),
        "CANDIDATE".to_owned(),
        "STEP".to_owned(),
        "ON-CANDIDATE".to_owned(),
        "FAILED".to_owned(),
        "REASON".to_owned(),
    ]];
    for (guest, r) in recorded {
        rows.push([
            guest.clone(),
            r.phase.as_str().to_owned(),
            short(&r.stable),
            r.candidate.as_deref().map_or_else(|| "-".to_owned(), short),
            if r.step == 0 {
                "-".to_owned()
            } else {
                format!("{} ({}%)", r.step, r.weight)
            },
            r.parents_on_candidate.to_string(),
            r.failed_reconciles.to_string(),
            r.reason.clone().unwrap_or_default(),
        ]);
    }
    for guest in listed.iter().filter(|g| !recorded.contains_key(*g)) {
        rows.push([
            guest.clone(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "listed, not running on the leader yet".into(),
        ]);
    }
    columns(rows)
}

/// `rows` (the first one the header) in aligned columns.
fn columns<const N: usize>(rows: Vec<[String; N]>) -> String {
    let widths: Vec<usize> = (0..N)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rollout::Phase;

    fn lease(name: &str, holder: Option<&str>) -> Lease {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"holderIdentity": holder},
        }))
        .unwrap()
    }

    fn event(guest: &str, kind: &str, reason: &str, at: i64, list: &str) -> Event {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("{list}.{at}")},
            "eventTime": format!("2026-12-07T10:00:{at:02}.000000Z"),
            "regarding": {"kind": "ConfigMap", "name": list},
            "reportingController": wasmop_contract::names::REPORTER,
            "reportingInstance": guest,
            "action": "LoadGuest",
            "type": kind,
            "reason": reason,
            "note": format!("{guest}: {reason}"),
        }))
        .unwrap()
    }

    #[test]
    fn a_guest_whose_last_load_event_is_a_warning_is_shown_refused() {
        let listed = ["a".to_owned(), "b".to_owned(), "c".to_owned()];
        let events = [
            // a: refused after it started.
            event("a", "Normal", "GuestStarted", 1, "guests"),
            event("a", "Warning", "SignatureInvalid", 2, "guests"),
            // b: refused, then swapped to a good version.
            event("b", "Warning", "DigestMismatch", 1, "guests"),
            event("b", "Normal", "GuestSwapped", 3, "guests"),
            // c: refused on another list; d: not listed.
            event("c", "Warning", "SignatureInvalid", 1, "other"),
            event("d", "Warning", "SignatureInvalid", 1, "guests"),
        ];
        let rows = refused("guests", &listed, &events);
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(
            rows[1][..2],
            ["a".to_owned(), "SignatureInvalid".to_owned()]
        );
        assert!(refused("guests", &listed, &events[2..4]).is_empty());
    }

    #[test]
    fn each_unit_of_a_listed_guest_gets_a_row_with_its_holder() {
        let guests = [("cache".to_owned(), 3), ("cache-2".to_owned(), 1)];
        let leases = [
            lease("wasmop", Some("host-a")),
            lease("wasmop-replica-host-a", Some("host-a")),
            lease("wasmop-cache-0", Some("host-b")),
            lease("wasmop-cache-2", Some("host-a")),
            lease("wasmop-cache", None),
            lease("other-cache-1", Some("x")),
        ];
        let text = columns(holders("wasmop", &guests, &leases));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].starts_with("GUEST"), "{text}");
        assert!(
            lines[1].starts_with("cache ")
                && lines[1].contains(" 0 ")
                && lines[1].ends_with("host-b"),
            "{text}"
        );
        // `wasmop-cache-2` is both shard 2 of cache and the Lease of
        // cache-2's one shard: each guest's row names it.
        assert!(
            lines[2].starts_with("cache ")
                && lines[2].contains(" 2 ")
                && lines[2].ends_with("host-a"),
            "{text}"
        );
        assert!(
            lines[3].starts_with("cache-2") && lines[3].ends_with("host-a"),
            "{text}"
        );
        assert!(
            holders("wasmop", &guests, &leases[..2]).is_empty(),
            "no unit has a Lease: no rows"
        );
    }

    #[test]
    fn every_guest_gets_a_row_with_its_phase_and_versions() {
        let mut recorded = BTreeMap::new();
        recorded.insert("plain".to_owned(), Record::stable(&"a".repeat(64)));
        recorded.insert(
            "rolling".to_owned(),
            Record {
                candidate: Some("b".repeat(64)),
                phase: Phase::Progressing,
                step: 1,
                weight: 10,
                parents_on_candidate: 2,
                reason: Some("step 1 of 2".into()),
                ..Record::stable(&"a".repeat(64))
            },
        );
        let text = table(&recorded, &["plain".into(), "waiting".into()]);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("GUEST"), "{text}");
        assert!(
            lines[1].starts_with("plain ") && lines[1].contains("Stable"),
            "{text}"
        );
        assert!(
            lines[2].contains("Progressing") && lines[2].contains("1 (10%)"),
            "{text}"
        );
        assert!(
            lines[2].contains("bbbbbbbbbbbb") && lines[2].ends_with("step 1 of 2"),
            "{text}"
        );
        assert!(
            lines[3].starts_with("waiting") && lines[3].contains("not running"),
            "{text}"
        );
    }
}
