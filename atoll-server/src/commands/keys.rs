//! PLACEHOLDER: being written.
use super::*;
use crate::engine::LockPlan;

pub fn copy(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn del(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn exists(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn expire(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn expireat(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn expiretime(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn keys(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn move_(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn object_encoding(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn object_freq(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn object_help(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn object_idletime(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn object_refcount(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn persist(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn pexpire(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn pexpireat(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn pexpiretime(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn plan_copy(_args: &[&[u8]], _db: usize, _plan: &mut LockPlan) -> CmdResult { Ok(()) }
pub fn plan_move(_args: &[&[u8]], _db: usize, _plan: &mut LockPlan) -> CmdResult { Ok(()) }
pub fn pttl(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn randomkey(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn rename(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn renamenx(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn scan(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn touch(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn ttl(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn type_(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn unlink(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
