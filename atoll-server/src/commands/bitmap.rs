//! PLACEHOLDER: being written.
use super::*;
use crate::engine::LockPlan;

pub fn bitcount(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn bitfield(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn bitfield_ro(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn bitop(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn bitpos(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn getbit(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
pub fn setbit(_ctx: &mut Ctx) -> CmdResult { Err(CmdError::msg("ERR not implemented yet")) }
