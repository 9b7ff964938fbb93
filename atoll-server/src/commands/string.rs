//! PLACEHOLDER: being written.
use super::*;
use crate::engine::LockPlan;

pub fn append(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn decr(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn decrby(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn get(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn getdel(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn getex(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn getrange(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn getset(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn incr(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn incrby(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn incrbyfloat(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn lcs(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn mget(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn mset(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn msetnx(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn psetex(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn set(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn setex(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn setnx(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn setrange(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn strlen(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
