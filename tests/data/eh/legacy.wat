;; Legacy exception handling (clang 19's `-fwasm-exceptions` encoding), as
;; heddle's translation into the final encoding must preserve it. Each
;; `;; => NAME(ARG) = RESULT` line is checked by running the translated
;; module (`trap` when the call must end in an uncaught exception).
(module
  (tag $e (param i32))
  (tag $f (param i32))
  (tag $z)
  (func $throw_e (param i32) (throw $e (local.get 0)))
  (func $throw_f (param i32) (throw $f (local.get 0)))

  ;; => catch_callee() = 107
  (func (export "catch_callee") (result i32)
    try (result i32)
      i32.const 7
      call $throw_e
      i32.const 0
    catch $e
      i32.const 100
      i32.add
    end)

  ;; => no_throw() = 5
  (func (export "no_throw") (result i32)
    try (result i32)
      i32.const 5
    catch $e
    catch_all
      i32.const -1
    end)

  ;; => second_clause() = 2005
  (func (export "second_clause") (result i32)
    try (result i32)
      i32.const 5
      call $throw_f
      i32.const 0
    catch $e
      i32.const 1000
      i32.add
    catch $f
      i32.const 2000
      i32.add
    catch_all
      i32.const -1
    end)

  ;; => catch_all() = 3
  (func (export "catch_all") (result i32)
    try (result i32)
      throw $z
    catch $e
      drop
      i32.const 1
    catch_all
      i32.const 3
    end)

  ;; => only_catch_all() = 4
  (func (export "only_catch_all") (result i32)
    try (result i32)
      i32.const 1
      call $throw_f
      i32.const 0
    catch_all
      i32.const 4
    end)

  ;; => tag_without_params() = 8
  (func (export "tag_without_params") (result i32)
    try (result i32)
      throw $z
    catch $e
    catch $z
      i32.const 8
    end)

  ;; => unmatched() = 90
  (func (export "unmatched") (result i32)
    try (result i32)
      try (result i32)
        i32.const 9
        call $throw_f
        i32.const 0
      catch $e
      end
    catch $f
      i32.const 10
      i32.mul
    end)

  ;; => rethrow() = 54
  (func (export "rethrow") (result i32)
    try (result i32)
      try (result i32)
        i32.const 4
        call $throw_e
        i32.const 0
      catch $e
        drop
        try (result i32)
          i32.const 1
          call $throw_f
          i32.const 0
        catch $f
          drop
          rethrow 1
        end
      end
    catch $e
      i32.const 50
      i32.add
    end)

  ;; => rethrow_all() = 13
  (func (export "rethrow_all") (result i32)
    try (result i32)
      try (result i32)
        i32.const 13
        call $throw_e
        i32.const 0
      catch_all
        rethrow 0
      end
    catch $e
    end)

  ;; => delegate() = 26
  (func (export "delegate") (result i32)
    try (result i32)
      try (result i32)
        try (result i32)
          i32.const 6
          call $throw_e
          i32.const 0
        delegate 1
      catch $e
        i32.const 1000
        i32.add
      end
    catch $e
      i32.const 20
      i32.add
    end)

  ;; => delegate_no_throw() = 17
  (func (export "delegate_no_throw") (result i32)
    try (result i32)
      try (result i32)
        i32.const 17
      delegate 0
    catch $e
      i32.const 1000
      i32.add
    end)

  ;; => delegate_chain() = 61
  (func (export "delegate_chain") (result i32)
    try (result i32)
      try (result i32)
        try (result i32)
          try (result i32)
            i32.const 1
            call $throw_e
            i32.const 0
          delegate 0
        delegate 1
      catch $e
        i32.const 1000
        i32.add
      end
    catch $e
      i32.const 60
      i32.add
    end)

  (func $delegates_out (param i32) (result i32)
    try (result i32)
      try (result i32)
        local.get 0
        i32.eqz
        if
          i32.const 12
          return
        end
        local.get 0
        call $throw_e
        i32.const 0
      delegate 1
    catch $e
      i32.const 1000
      i32.add
    end)

  ;; => delegate_caller(8) = 38
  ;; => delegate_caller(0) = 12
  (func (export "delegate_caller") (param i32) (result i32)
    try (result i32)
      local.get 0
      call $delegates_out
    catch $e
      i32.const 30
      i32.add
    end)

  (func $delegates_ok (param i32) (result i32)
    try (result i32)
      local.get 0
    delegate 0)

  ;; => delegate_normal() = 12
  (func (export "delegate_normal") (result i32)
    i32.const 12
    call $delegates_ok)

  ;; => delegate_block() = 42
  (func (export "delegate_block") (result i32)
    try (result i32)
      block (result i32)
        try (result i32)
          i32.const 2
          call $throw_e
          i32.const 0
        delegate 0
      end
    catch $e
      i32.const 40
      i32.add
    end)

  ;; => branches(0) = 11
  ;; => branches(1) = 22
  ;; => branches(2) = 1033
  (func (export "branches") (param i32) (result i32)
    block $out (result i32)
      try $t (result i32)
        local.get 0
        i32.eqz
        if
          i32.const 11
          br $out
        end
        local.get 0
        call $throw_e
        i32.const 0
      catch $e
        i32.const 1
        i32.eq
        if
          i32.const 22
          br $out
        end
        i32.const 33
        br $t
      end
      i32.const 1000
      i32.add
    end)

  ;; => br_table(0) = 100
  ;; => br_table(1) = 200
  ;; => br_table(2) = 300
  (func (export "br_table") (param i32) (result i32)
    block $a
      block $b
        try $t
          local.get 0
          br_table $a $b $t
        catch_all
        end
        i32.const 300
        return
      end
      i32.const 200
      return
    end
    i32.const 100)

  ;; => loop() = 10
  (func (export "loop") (result i32) (local i32 i32)
    loop $l
      try
        local.get 0
        call $throw_e
      catch $e
        local.get 1
        i32.add
        local.set 1
      end
      local.get 0
      i32.const 1
      i32.add
      local.tee 0
      i32.const 5
      i32.lt_u
      br_if $l
    end
    local.get 1)

  ;; => plain_try() = 3
  (func (export "plain_try") (result i32)
    try (result i32)
      i32.const 3
    end)

  ;; => uncaught() = trap
  (func (export "uncaught") (result i32)
    try (result i32)
      i32.const 1
      call $throw_f
      i32.const 0
    catch $e
    end)

  ;; => final_encoding() = 77
  (func (export "final_encoding") (result i32)
    block $h (result i32)
      try_table (catch $e $h)
        i32.const 77
        call $throw_e
      end
      i32.const 0
    end)
)
