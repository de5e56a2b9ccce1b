//! Namespace calls lost in a NameNode failover, made good.
//!
//! When the active NameNode dies after a call that changes the namespace left
//! the client (mkdirs, delete, rename, create, addBlock, complete), nobody
//! knows whether it was applied. Hadoop's Java client sends it again, and the
//! NameNode that took over answers the resent call from its retry cache (the
//! standby rebuilds that cache from the edit log). hdfs-native sends a retry
//! from a new connection with a new client id, which that cache cannot match,
//! so it sends nothing again and fails the call with an I/O error.
//!
//! On an HA name service the plugin makes such a call good itself, by what the
//! namespace shows once the other NameNode has taken over:
//! - **mkdirs** is sent again: a directory that exists is a success;
//! - **delete**: the path gone means the lost call deleted it; still there,
//!   the delete is sent again;
//! - **rename**: the source gone and the destination there means the lost
//!   call renamed it; the source still there, the rename is sent again.
//!
//! A new file's create, addBlock and complete are made good by writing the
//! file anew (`writer.rs`). An append lost mid-call still fails.
//!
//! A call the NameNode answers with `RetriableException` applied nothing and
//! is sent again after a second, up to [`ASKED_AGAIN`] times, as Hadoop's Java
//! client does: a NameNode still taking over answers so for a delegation
//! token it has not loaded yet (`InvalidToken ... can't be found in cache`,
//! seen on 3.1.1 in a checkpoint's close), as does one still starting.

use std::time::Duration;

use crate::errors::{TfError, TfResult};
use crate::ffi::Code;

/// Times a lost call is made good before its error is the caller's.
pub const AGAIN: u32 = 2;

/// Whether a failed call is one a failover explains: an I/O error (the
/// connection lost mid-call), not a refusal by the NameNode, nor a name
/// service whose NameNodes all refused connections to the end (it is down).
pub fn lost_mid_call(e: &TfError) -> bool {
    match e.message.split_once("I/O error") {
        Some((_, said)) => e.code == Code::Unavailable && !said.to_lowercase().contains("refused"),
        None => false,
    }
}

/// Times a call the NameNode asked to be sent again is sent again.
pub const ASKED_AGAIN: u32 = 8;

/// Whether the NameNode answered `RetriableException`: nothing applied, ask again.
pub fn asked_again(e: &TfError) -> bool {
    e.code == Code::Unavailable && e.message.contains("RetriableException")
}

/// Give the name service's other NameNode a moment to take over; the
/// client's own failover waits ride out the rest.
pub fn settle() {
    std::thread::sleep(SETTLE);
}

#[cfg(not(test))]
const SETTLE: Duration = Duration::from_secs(1);
// The tests count calls, not seconds.
#[cfg(test)]
const SETTLE: Duration = Duration::from_millis(1);

/// `call`, made good after a lost attempt on a name service (`ha`).
///
/// `took_effect` looks at the namespace after a loss: `Ok(Some(v))` if the
/// lost call was applied (`v` is its result), `Ok(None)` to send it again,
/// `Err` to fail (it gets the loss's error, to return when nothing explains it).
pub fn made_good<T>(
    ha: bool,
    mut call: impl FnMut() -> TfResult<T>,
    mut took_effect: impl FnMut(TfError) -> TfResult<Option<T>>,
) -> TfResult<T> {
    let (mut lost, mut asked) = (0, 0);
    loop {
        match call() {
            Err(e) if ha && lost_mid_call(&e) && lost < AGAIN => {
                lost += 1;
                settle();
                if let Some(v) = took_effect(e)? {
                    return Ok(v);
                }
            }
            Err(e) if asked_again(&e) && asked < ASKED_AGAIN => {
                asked += 1;
                settle();
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn err(code: Code, message: &str) -> TfError {
        TfError::new(code, message.to_string())
    }

    fn lost() -> TfError {
        err(
            Code::Unavailable,
            "HDFS rename of hdfs://ns/f failed: no NameNode of the name service ns (nn1 at a:1, nn2 at b:1) served it: none could be reached (I/O error: RPC listener disconnected).",
        )
    }

    #[test]
    fn only_a_connection_lost_mid_call_counts_as_lost() {
        assert!(lost_mid_call(&lost()));
        // The NameNode refused: sending it again would be refused again.
        assert!(!lost_mid_call(&err(Code::PermissionDenied, "HDFS create of hdfs://ns/f failed: AccessControlException: denied")));
        assert!(!lost_mid_call(&err(Code::Unavailable, "HDFS write of hdfs://ns/f failed: data transfer: pipeline")));
        assert!(!lost_mid_call(&err(Code::DeadlineExceeded, "did not answer within 60 s (I/O error)")));
        assert!(!lost_mid_call(&err(Code::Unavailable, "HDFS mkdirs of hdfs://ns/d failed: no NameNode of the name service ns served it: none could be reached (I/O error: Connection refused (os error 111))")));
    }

    /// A call lost its first `lost_times` times, then answering 3; counts its calls.
    fn lost_then_3(calls: &Cell<u32>, lost_times: u32) -> impl FnMut() -> TfResult<u8> + '_ {
        move || {
            calls.set(calls.get() + 1);
            if calls.get() <= lost_times { Err(lost()) } else { Ok(3) }
        }
    }

    #[test]
    fn a_lost_call_that_was_applied_succeeds_without_being_sent_again() {
        let calls = Cell::new(0);
        assert_eq!(made_good(true, lost_then_3(&calls, 1), |_| Ok(Some(7))).unwrap(), 7);
        assert_eq!(calls.get(), 1);
    }

    #[test]
    fn a_lost_call_that_was_not_applied_is_sent_again() {
        let calls = Cell::new(0);
        assert_eq!(made_good(true, lost_then_3(&calls, 1), |_| Ok(None)).unwrap(), 3);
        assert_eq!(calls.get(), 2);
    }

    #[test]
    fn a_call_lost_every_time_fails_after_the_last_try() {
        let calls = Cell::new(0);
        let got = made_good(true, lost_then_3(&calls, u32::MAX), |_| Ok(None));
        assert!(lost_mid_call(&got.unwrap_err()));
        assert_eq!(calls.get(), 1 + AGAIN);
    }

    #[test]
    fn without_a_name_service_or_for_a_refusal_the_first_error_stands() {
        for (ha, first) in [(false, lost()), (true, err(Code::NotFound, "HDFS rename of hdfs://ns/f failed: no such file"))] {
            let calls = Cell::new(0);
            let looked = Cell::new(false);
            let got = made_good(
                ha,
                || {
                    calls.set(calls.get() + 1);
                    Err::<u8, _>(TfError::new(first.code, first.message.clone()))
                },
                |_| {
                    looked.set(true);
                    Ok(Some(1))
                },
            );
            assert_eq!(got.unwrap_err().code, first.code);
            assert_eq!((calls.get(), looked.get()), (1, false));
        }
    }

    fn retriable() -> TfError {
        err(
            Code::Unavailable,
            "HDFS close of hdfs://ns/f failed: RetriableException: org.apache.hadoop.security.token.SecretManager$InvalidToken: token (token for root: HDFS_DELEGATION_TOKEN owner=root, sequenceNumber=1) can't be found in cache",
        )
    }

    #[test]
    fn a_call_the_namenode_asks_again_for_is_sent_again_without_looking() {
        assert!(asked_again(&retriable()) && !lost_mid_call(&retriable()));
        assert!(!asked_again(&lost()));
        assert!(!asked_again(&err(Code::Unauthenticated, "HDFS open of hdfs://ns/f failed: InvalidToken: expired")));
        for ha in [true, false] {
            let calls = Cell::new(0);
            let got = made_good(
                ha,
                || {
                    calls.set(calls.get() + 1);
                    if calls.get() <= 2 { Err(retriable()) } else { Ok(3) }
                },
                |_| panic!("nothing was applied: no need to look"),
            );
            assert_eq!((got.unwrap(), calls.get()), (3, 3));
        }
        let calls = Cell::new(0);
        let got = made_good(true, || { calls.set(calls.get() + 1); Err::<u8, _>(retriable()) }, |_| Ok(None));
        assert!(asked_again(&got.unwrap_err()));
        assert_eq!(calls.get(), 1 + ASKED_AGAIN);
    }

    #[test]
    fn a_loss_nothing_explains_fails_with_its_own_error() {
        let got = made_good(true, || Err::<u8, _>(lost()), Err);
        assert!(lost_mid_call(&got.unwrap_err()));
    }
}
